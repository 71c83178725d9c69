"""Training models of the compiled family on a target: a run (``train``, its ``settings``), a
grid of runs (``sweep``), and Ray (``cluster``)."""
