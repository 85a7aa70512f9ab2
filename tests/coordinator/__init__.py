"""Tests of kiel.coordinator: groups the brokers coordinate (JoinGroup/SyncGroup)."""
