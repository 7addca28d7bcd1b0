"""Tests of turnkit.backends: ProcessBackend and AcpBackend against real peers."""
