"""A compiled model measured against the oracle: its error over vectors (``vectors``), its
answers over token sequences (``tokens``), and what a measurement costs (``workload``)."""
