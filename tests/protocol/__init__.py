"""Tests of kiel.protocol: the wire format, byte for byte and under hostile input."""
