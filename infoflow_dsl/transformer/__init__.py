"""The compiled model: its module, hooks, file format and fast paths."""
