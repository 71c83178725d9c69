# fuzz failure: crash
# symptom: ProgramError: sequence_map_1602.iflow:5:50: error: the reference evaluator cannot decide this exactly: its operands take values as close as 0 (exact: 1/5000000000000000), which float64 cannot separate from their computed error at exact.py:210
# compiled at eps = 0.001, dtype = float64; batch seed 100238 (bench/fuzz.py)
# before shrinking: ProgramError: sequence_map_1569.iflow:5:26: error: the reference evaluator cannot decide this exactly: its operands take values as close as 4.44e-16 (exact: 1/5000000000000000), which float64 cannot separate from their computed error at exact.py:210
from infoflow_dsl import rasp
from infoflow_dsl.rasp import library

VOCAB = (0, 1, 2)
MAX_SEQ_LEN = 3
v1 = rasp.SequenceMap(lambda x, y: x + 0.3 * y, rasp.length, rasp.length)
v2 = rasp.SequenceMap(lambda x, y: x + y, rasp.tokens, rasp.tokens)
v3 = rasp.SequenceMap(lambda x, y: x + y, rasp.tokens, v1)
program = v3
