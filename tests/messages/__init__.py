"""Tests of turnkit.messages: the data model, validation and the pipeline."""
