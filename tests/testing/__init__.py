"""Tests of kiel.testing: the embedded 0.8.2 broker, the fault proxy, the launchers."""
