"""Compiled models as standard architectures: a Hugging Face GPT-2 directory and its inputs."""
