# fuzz failure: translation
# symptom: RASP's evaluator writes f"{x}{y}" of a mean as "a1.0" and the translation "a1"
# compiled at eps = 0.001, dtype = float64; run 4 (bench/fuzz.py)
# (a numerical mean is 1 where one value is selected and 1.0 where two are: a function that
# tells them apart is refused at its SequenceMap, named by its label)
from infoflow_dsl import rasp

VOCAB = ("a", "b")
MAX_SEQ_LEN = 3
ones = rasp.numerical(rasp.Map(lambda x: 1 if x == "a" else 0, rasp.tokens))
mean = rasp.numerical(rasp.Aggregate(rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LEQ), ones, default=0))
program = rasp.SequenceMap(lambda x, y: f"{x}{y}", rasp.tokens, mean)
