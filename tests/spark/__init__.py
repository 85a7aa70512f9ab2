"""Tests of kiel.spark: the PySpark data source."""
