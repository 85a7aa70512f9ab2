"""Tests of kiel.cli: the ``kiel`` command."""
