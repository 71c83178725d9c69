"""Verification above the pipeline (each relowers a model's program): ``check`` (the model
against its target, adversarial search, trace) and ``sites`` (where each comparison and FFN
function lives in the model: ``ifl.circuit``)."""
