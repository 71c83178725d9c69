# fuzz failure: wrong
# symptom: measured 1 > bound 4.8e-14 (ε 0.001, float64); input [2, 2, 2]: model [2.9999999999999996, 2.9999999999999996, 2.9999999999999996], reference [2.0, 2.0, 2.0]
# compiled at eps = 0.001, dtype = float64; batch seed 5030 (bench/fuzz.py)
# before shrinking: measured 0.25 > bound 1.27e-13 (ε 0.001, float64); input [0, 0, 0]: model [1.250000000000003, 1.250000000000003, 1.250000000000003], reference [1.0, 1.0, 1.0]
from infoflow_dsl import rasp

VOCAB = (0, 1, 2)
MAX_SEQ_LEN = 3
v1 = rasp.numerical(rasp.Aggregate(rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.EQ), rasp.numerical(rasp.Map(lambda x: x, rasp.tokens)), default=0))
program = v1
