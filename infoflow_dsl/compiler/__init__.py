"""Schedule -> circuit IR (named directions, heads, FFN blocks) -> tensors."""
