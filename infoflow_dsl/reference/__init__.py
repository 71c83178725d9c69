"""The exact float64 oracle, input sampling, and what is measured against it."""
