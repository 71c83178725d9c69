"""The exact float64 oracle: the reference evaluator (``evaluate``), its fast paths, token
encoding (``tokens``) and input sampling. Below the compiler: nothing here imports it."""
