# fuzz failure: crash
# symptom: ProgramError: sequence_map_3680.iflow:5:47: error: the reference evaluator cannot decide this exactly: its operands take values as close as 0 (exact: 1/10000000000000000), which float64 cannot separate from their computed error at exact.py:210
# compiled at eps = 0.001, dtype = float64; batch seed 100355 (bench/fuzz.py)
# before shrinking: ProgramError: aggregate_4835.iflow:5:15: error: the reference evaluator cannot decide this exactly: its operands take values as close as 0 (exact: 1/10000000000000000), which float64 cannot separate from their computed error at exact.py:210
from infoflow_dsl import rasp
from infoflow_dsl.rasp import library

VOCAB = (0, 1, 2)
MAX_SEQ_LEN = 3
v1 = rasp.Map(lambda x: x - 0.1, rasp.length)
v2 = rasp.SequenceMap(lambda x, y: x + y, rasp.tokens, v1)
program = v2
