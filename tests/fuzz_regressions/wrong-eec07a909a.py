# fuzz failure: wrong
# symptom: measured 2.6 > bound 2.65e-14 (ε 0.001, float64); input [2]: model [2.5999999999999988], reference [0.0]
# compiled at eps = 0.001, dtype = float64; batch seed 100948 (bench/fuzz.py)
# before shrinking: measured 0.78 > bound 1.69e-14 (ε 0.001, float64); input [0, 0]: model [0.6700000000000003, 0.7800000000000002], reference [0.67, 0.0]
from infoflow_dsl import rasp
from infoflow_dsl.rasp import library

VOCAB = (0, 1, 2)
MAX_SEQ_LEN = 3
v1 = rasp.SequenceMap(lambda x, y: x + 0.3 * y, rasp.length, rasp.tokens)
v2 = library.shift_by(1, rasp.tokens)
v3 = rasp.Map(lambda x: x + 1, v1)
program = v3
