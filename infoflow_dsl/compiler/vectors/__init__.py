"""Stage 4, lower: a schedule -> a circuit within ε (see :mod:`.vector_lowering`).

The constructions live one family a module: ``fetch`` (position and presence heads),
``retrieval`` (min/max and argmin/argmax heads), ``uniform`` (sum/mean heads), ``squares`` and
``ffn`` (FFN blocks), ``values`` (the expression walker), on a ``builder.CircuitBuilder``;
``quantity`` is their error arithmetic and ``budget`` the allocation of ε.
"""

from .quantity import ROUNDING_SAFETY, sqrt_knots
from .vector_lowering import UNIT_ROUNDOFF, lower

__all__ = ["ROUNDING_SAFETY", "UNIT_ROUNDOFF", "lower", "sqrt_knots"]
