# fuzz failure: crash
# symptom: ProgramError: sequence_map_17819.iflow:5:47: error: the reference evaluator cannot decide this exactly: its operands take values as close as 0 (exact: 1/10000000000000000), which float64 cannot separate from their computed error at exact.py:210
# compiled at eps = 0.001, dtype = float64; batch seed 101082 (bench/fuzz.py)
# before shrinking: ProgramError: aggregate_17188.iflow:10:17: error: the reference evaluator cannot decide this exactly: its operands take values as close as 0 (exact: 1/10000000000000000), which float64 cannot separate from their computed error at exact.py:210
from infoflow_dsl import rasp
from infoflow_dsl.rasp import library

VOCAB = (0, 1, 2)
MAX_SEQ_LEN = 3
v1 = rasp.Map(lambda x: x + 1, rasp.tokens)
v2 = rasp.Map(lambda x: x + 1, rasp.tokens)
v3 = rasp.Map(lambda x: x - 0.1, rasp.length)
v4 = rasp.SequenceMap(lambda x, y: x + y, rasp.tokens, v3)
program = v4
