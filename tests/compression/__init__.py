"""Tests of kiel.compression."""
