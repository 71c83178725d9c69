# fuzz failure: crash
# symptom: ProgramError: aggregate_12394.iflow:6:34: error: the reference evaluator cannot decide this exactly: its operands take values as close as 0 (exact: 1/25000000000000000), which float64 cannot separate from their computed error at exact.py:210
# compiled at eps = 0.001, dtype = float64; batch seed 100710 (bench/fuzz.py)
# before shrinking: ProgramError: <string>:4:15: error: the reference evaluator cannot decide this exactly: its operands take values as close as 5.55e-17 (exact: 1/25000000000000000), which float64 cannot separate from their computed error at exact.py:210
from infoflow_dsl import rasp
from infoflow_dsl.rasp import library

VOCAB = (0, 1, 2)
MAX_SEQ_LEN = 4
v1 = rasp.Map(lambda x: x + 1, rasp.tokens)
v2 = rasp.Map(lambda x: round(x / 3, 2), rasp.indices)
v3 = rasp.Map(lambda x: x + 1, rasp.tokens)
v4 = rasp.Aggregate(rasp.Select(rasp.tokens, v2, rasp.Comparison.EQ), rasp.tokens)
program = v4
