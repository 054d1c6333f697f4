"""Formal properties of the router (filled in by its harness module)."""

PROPERTIES = []
