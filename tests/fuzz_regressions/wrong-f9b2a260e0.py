# fuzz failure: wrong
# symptom: measured 0.5 > bound 5.23e-14 (ε 0.001, float64); input [0, 0, 0]: model [1.4999999999999993, 1.4999999999999993, 1.4999999999999993], reference [1.0, 1.0, 1.0]
# compiled at eps = 0.001, dtype = float64; batch seed 5015 (bench/fuzz.py)
# before shrinking: measured 0.75 > bound 6.72e-05 (ε 0.01, float32); input [0, 0, 0]: model [3.750020980834961, 3.750020980834961, 3.750020980834961], reference [3.0, 3.0, 3.0]
from infoflow_dsl import rasp

VOCAB = (0, 1, 2)
MAX_SEQ_LEN = 3
v1 = rasp.Aggregate((rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.EQ) & rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.EQ)), rasp.indices)
program = v1
