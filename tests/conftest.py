"""Shared test set-up: one torch thread, and hypothesis's deterministic profile under CI."""

from __future__ import annotations

import torch

torch.set_num_threads(1)
