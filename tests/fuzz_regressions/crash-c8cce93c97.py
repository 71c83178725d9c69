# fuzz failure: crash
# symptom: ProgramError: sequence_map_6479.iflow:4:15: error: the reference evaluator cannot decide this exactly: its operands take values as close as 0 (exact: 1/10000000000000000), which float64 cannot separate from their computed error at exact.py:210
# compiled at eps = 0.001, dtype = float64; batch seed 100476 (bench/fuzz.py)
# before shrinking: ProgramError: aggregate_6112.iflow:5:25: error: the reference evaluator cannot decide this exactly: its operands take values as close as 0 (exact: 1/10000000000000000), which float64 cannot separate from their computed error at exact.py:210
from infoflow_dsl import rasp
from infoflow_dsl.rasp import library

VOCAB = ('a', 'b', 'c')
MAX_SEQ_LEN = 3
v1 = rasp.Map(lambda x: x.upper(), rasp.tokens)
v2 = rasp.Map(lambda x: x - 0.1, rasp.length)
v3 = rasp.SequenceMap(lambda x, y: f"{x}{y}", rasp.tokens, v2)
program = v3
