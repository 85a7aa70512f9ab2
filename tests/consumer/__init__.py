"""Tests of kiel.consumer: SingleConsumer, GroupedConsumer and their parts."""
