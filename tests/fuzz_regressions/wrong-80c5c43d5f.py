# fuzz failure: wrong
# symptom: measured 0.5 > bound 5.23e-14 (ε 0.001, float64); input [0, 0, 0]: model [1.4999999999999993, 1.4999999999999993, 1.4999999999999993], reference [1.0, 1.0, 1.0]
# compiled at eps = 0.001, dtype = float64; batch seed 5001 (bench/fuzz.py)
# before shrinking: measured 1.17 > bound 1.21e-13 (ε 1e-06, float64); input [0, 0, 1]: model [3.5000000000000067, 3.5000000000000067, 3.5000000000000067], reference [2.333333333333333, 2.333333333333333, 2.333333333333333]
from infoflow_dsl import rasp

VOCAB = (0, 1, 2)
MAX_SEQ_LEN = 3
v1 = rasp.Map(lambda x: x + 1, rasp.tokens)
v2 = rasp.Map(lambda x: x + 1, rasp.tokens)
v3 = rasp.Aggregate(rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.EQ), rasp.indices)
program = v3
