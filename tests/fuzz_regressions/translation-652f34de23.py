# fuzz failure: translation
# symptom: RASP's evaluator disagrees: 0 wrong tokens, worst 1, first ((0, 0, 1), 2, 8.074349270016514e-17, 1.0)
# compiled at eps = 0.001, dtype = float64; batch seed 100835 (bench/fuzz.py)
# before shrinking: RASP's evaluator disagrees: 0 wrong tokens, worst 1.57, first ((2, 2, 1), 2, -1.4988010832439613e-15, 1.5666666666666667)
from infoflow_dsl import rasp
from infoflow_dsl.rasp import library

VOCAB = (0, 1, 2)
MAX_SEQ_LEN = 3
v1 = rasp.Map(lambda x: x + 1, rasp.tokens)
v2 = rasp.Map(lambda x: round(x / 3, 2), rasp.length)
v3 = rasp.Aggregate(rasp.Select(v2, rasp.tokens, rasp.Comparison.EQ), rasp.indices)
program = v3
