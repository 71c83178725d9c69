# fuzz failure: crash
# symptom: ProgramError: <string>:4:24: error: the reference evaluator cannot decide this exactly: its operands take values as close as 2.22e-16 (exact: 1/5000000000000000), which float64 cannot separate from their computed error at exact.py:210
# compiled at eps = 0.001, dtype = float64; batch seed 101064 (bench/fuzz.py)
# before shrinking: ProgramError: sequence_map_16971.iflow:4:24: error: the reference evaluator cannot decide this exactly: its operands take values as close as 0 (exact: 1/50000000000000000), which float64 cannot separate from their computed error at exact.py:210
from infoflow_dsl import rasp
from infoflow_dsl.rasp import library

VOCAB = (0, 1, 2)
MAX_SEQ_LEN = 4
v1 = rasp.SequenceMap(lambda x, y: x + 0.3 * y, rasp.indices, rasp.indices)
v2 = rasp.SequenceMap(lambda x, y: x + y / 3, rasp.tokens, v1)
program = v2
