# fuzz failure: crash
# symptom: ProgramError: map_5159.iflow:4:24: error: the reference evaluator cannot decide this exactly: its operands take values as close as 0 (exact: 1/50000000000000000), which float64 cannot separate from their computed error at exact.py:210
# compiled at eps = 0.001, dtype = float64; batch seed 100422 (bench/fuzz.py)
# before shrinking: ProgramError: selector_width_5114.iflow:5:35: error: the reference evaluator cannot decide this exactly: its operands take values as close as 0 (exact: 1/100000000000000000), which float64 cannot separate from their computed error at exact.py:210
from infoflow_dsl import rasp
from infoflow_dsl.rasp import library

VOCAB = (0.1, 0.3, 1)
MAX_SEQ_LEN = 3
v1 = rasp.SequenceMap(lambda x, y: x + y / 3, rasp.tokens, rasp.indices)
v2 = rasp.Map(lambda x: x > 1, v1)
program = v2
