# fuzz failure: translation
# symptom: RASP's evaluator disagrees: 62 wrong tokens, worst 0, first (('a',), 0, 'aFalse', 'a0')
# compiled at eps = 0.001, dtype = float64; batch seed 60157 (bench/fuzz.py)
# before shrinking: RASP's evaluator disagrees: 34 wrong tokens, worst 0, first (('a',), 0, 'aFalse', 'a0')
from infoflow_dsl import rasp
from infoflow_dsl.rasp import library

VOCAB = ('a', 'b', 'c')
MAX_SEQ_LEN = 3
v1 = rasp.Map(lambda x: x > 1, rasp.indices)
v2 = rasp.numerical(rasp.Aggregate(rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.LT), rasp.numerical(rasp.Map(lambda x: x, v1)), default=0))
v3 = rasp.SequenceMap(lambda x, y: f"{x}{y}", rasp.tokens, v2)
program = v3
