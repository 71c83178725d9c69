"""Circuit discovery scored against certified truth (issue "the circuit-discovery benchmark").

The field's discovery methods, written here on the edge-level forward of
``circuits/patching.py`` (TransformerLens 4 dropped the ``HookedTransformer`` the original
code needs), each scoring every candidate edge of a compiled model: ``exact`` (one forward an
edge), ``eap``, ``eap-ig`` and ``eap-ig-inputs`` (attribution patching, one forward and backward;
with integrated gradients), ``acdc`` (greedy pruning), and the ``node`` and ``random``
baselines. ``scores.discover`` runs one and scores it against the truth (``circuits.truth``) of
the same ablation. This package imports no torch at import time.
"""

METHODS = ("exact", "eap", "eap-ig", "eap-ig-inputs", "acdc", "node", "random")
#: the metrics of a token output and of a numeric one (the first: the default of a gradient method)
TOKEN_METRICS = ("logit-diff", "kl", "accuracy")
NUMBER_METRICS = ("output", "l2", "error")
GRADIENT_METHODS = ("eap", "eap-ig", "eap-ig-inputs")
