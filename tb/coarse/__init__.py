"""Stimulus for the COARSE hardware's tests (hdl/coarse/)."""
