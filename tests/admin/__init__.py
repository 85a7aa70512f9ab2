"""Tests of kiel.admin."""
