"""Certified ground truth for circuit discovery: a compiled model's edge graph (``graph``), the
edge-level forward that ablates any set of edges (``patching``), and which edges each ablation
needs (``truth``)."""

#: the ablations a truth is stated for (``patching``); here, so that the command line reads them without torch
ABLATIONS = ("zero", "mean", "resample")
