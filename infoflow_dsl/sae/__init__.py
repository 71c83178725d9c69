"""Sparse autoencoders on compiled models, scored against the known features (``infoflowc sae``)."""
