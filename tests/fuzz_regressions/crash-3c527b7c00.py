# fuzz failure: crash
# symptom: NotImplementedError: "bitwise_and_cpu" not implemented for 'Double' at evaluate.py:181
# compiled at eps = 0.001, dtype = float64; batch seed 101006 (bench/fuzz.py)
# before shrinking: NotImplementedError: "bitwise_or_cpu" not implemented for 'Double' at evaluate.py:181
from infoflow_dsl import rasp
from infoflow_dsl.rasp import library

VOCAB = (0, 1, 2)
MAX_SEQ_LEN = 3
v1 = rasp.Aggregate((rasp.Select(rasp.length, rasp.tokens, rasp.Comparison.EQ) & rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.EQ)), rasp.indices)
program = v1
