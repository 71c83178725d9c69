# fuzz failure: crash
# symptom: ProgramError: <string>:5:15: error: the reference evaluator cannot decide this exactly: its operands take values as close as 5.55e-17 (exact: 1/25000000000000000), which float64 cannot separate from their computed error at exact.py:210
# compiled at eps = 0.001, dtype = float64; batch seed 100544 (bench/fuzz.py)
# before shrinking: ProgramError: <string>:4:15: error: the reference evaluator cannot decide this exactly: its operands take values as close as 5.55e-17 (exact: 1/25000000000000000), which float64 cannot separate from their computed error at exact.py:210
from infoflow_dsl import rasp
from infoflow_dsl.rasp import library

VOCAB = (0, 1, 2)
MAX_SEQ_LEN = 4
v1 = rasp.numerical(rasp.Aggregate(rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.EQ), rasp.numerical(rasp.tokens), default=0))
v2 = rasp.Aggregate(rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.EQ), rasp.tokens)
v3 = rasp.Map(lambda x: round(x / 3, 2), rasp.indices)
v4 = rasp.SelectorWidth(rasp.Select(v3, v2, rasp.Comparison.EQ))
program = v4
