# fuzz failure: translation
# symptom: RASP's evaluator disagrees: 6 wrong tokens, worst 0, first ((0, 1, 2), 2, 0, 0.5)
# compiled at eps = 0.001, dtype = float64; batch seed 5028 (bench/fuzz.py)
# before shrinking: RASP's evaluator disagrees: 70 wrong tokens, worst 0, first ((1, 2), 0, 1, 1.5)
from infoflow_dsl import rasp

VOCAB = (0, 1, 2)
MAX_SEQ_LEN = 3
v1 = rasp.Aggregate(rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.LT), rasp.tokens)
program = v1
