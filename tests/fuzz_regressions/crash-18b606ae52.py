# fuzz failure: crash
# symptom: NotImplementedError: "bitwise_and_cpu" not implemented for 'Double' at evaluate.py:181
# compiled at eps = 0.001, dtype = float64; batch seed 100953 (bench/fuzz.py)
from infoflow_dsl import rasp
from infoflow_dsl.rasp import library

VOCAB = (0, 1, 2)
MAX_SEQ_LEN = 3
v1 = rasp.Map(lambda x: x + 1, rasp.tokens)
v2 = rasp.Map(lambda x: x + 1, rasp.tokens)
v3 = rasp.SequenceMap(lambda x, y: x + y, rasp.tokens, rasp.tokens)
v4 = rasp.Aggregate((rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.EQ) & rasp.Select(rasp.length, rasp.tokens, rasp.Comparison.EQ)), rasp.indices)
program = v4
