"""Tests of kiel.producer."""
