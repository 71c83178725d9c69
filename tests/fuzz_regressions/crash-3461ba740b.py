# fuzz failure: crash
# symptom: ProgramError: sequence_map_10101.iflow:5:48: error: the reference evaluator cannot decide this exactly: its operands take values as close as 0 (exact: 1/25000000000000000), which float64 cannot separate from their computed error at exact.py:210
# compiled at eps = 0.001, dtype = float64; batch seed 101185 (bench/fuzz.py)
# before shrinking: ProgramError: sequence_map_10042.iflow:4:15: error: the reference evaluator cannot decide this exactly: its operands take values as close as 0 (exact: 11/100000000000000000), which float64 cannot separate from their computed error at exact.py:210
from infoflow_dsl import rasp
from infoflow_dsl.rasp import library

VOCAB = (0, 1, 2)
MAX_SEQ_LEN = 4
v1 = rasp.Map(lambda x: round(x / 3, 2), rasp.indices)
v2 = rasp.SequenceMap(lambda x, y: x + y, rasp.length, v1)
program = v2
