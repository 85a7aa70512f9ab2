"""pytest plugin (entry point ``pytest11``): fixtures for kiel's real test parts."""
