# fuzz failure: crash
# symptom: ProgramError: map_1570.iflow:7:20: error: the reference evaluator cannot decide this exactly: its operands take values as close as 1.11e-16 (exact: 1/10000000000000000), which float64 cannot separate from their computed error at exact.py:210
# compiled at eps = 0.001, dtype = float64; batch seed 5035 (bench/fuzz.py)
# before shrinking: ProgramError: sequence_map_1282.iflow:10:48: error: the reference evaluator cannot decide this exactly: its operands take values as close as 0 (exact: 1/10000000000000000), which float64 cannot separate from their computed error at exact.py:210
from infoflow_dsl import rasp

VOCAB = (0, 1, 2)
MAX_SEQ_LEN = 3
v1 = rasp.Map(lambda x: x + 1, rasp.tokens)
v2 = rasp.Aggregate(rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.EQ), rasp.indices)
v3 = rasp.Map(lambda x: x + 1, v2)
program = v3
