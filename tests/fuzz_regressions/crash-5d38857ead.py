# fuzz failure: crash
# symptom: ProgramError: shift_by(1).iflow:6:36: error: the reference evaluator cannot decide this exactly: its operands take values as close as 1.11e-16 (exact: 1/10000000000000000), which float64 cannot separate from their computed error at exact.py:210
# compiled at eps = 0.001, dtype = float64; batch seed 5005 (bench/fuzz.py)
# before shrinking: ProgramError: shift_by(2).iflow:5:35: error: the reference evaluator cannot decide this exactly: its operands take values as close as 1.11e-16 (exact: 1/10000000000000000), which float64 cannot separate from their computed error at exact.py:210
from infoflow_dsl import rasp
from infoflow_dsl.rasp import library

VOCAB = (0, 1, 2)
MAX_SEQ_LEN = 3
v1 = rasp.Map(lambda x: x / 3, rasp.length)
v2 = rasp.numerical(rasp.Aggregate(rasp.Select(rasp.tokens, v1, rasp.Comparison.EQ), rasp.numerical(rasp.Map(lambda x: x, rasp.tokens)), default=0))
v3 = rasp.Map(lambda x: x + 1, rasp.tokens)
v4 = library.shift_by(1, v2)
program = v4
