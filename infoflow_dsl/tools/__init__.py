"""The command line, training and sweeps."""
