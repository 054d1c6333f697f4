"""Schedules from and to other tools' formats: MSCCL-IR XML read (``msccl_read``) and checked on
its own terms (``msccl_check``); the writer is ``golden_model.exporters.msccl_xml``
(docs/interchange.md)."""
