#!/usr/bin/env bash
# The GPU check: the tests that have a cuda parameter, then compile, check, forward, training
# alone and batched, and the paper-scale sweep at reduced steps, on this machine's GPU, in at
# most 5 minutes; one JSON of figures in $OUT (default ./gpu_out): gpu_check.json, with the
# tests' JUnit file and log beside it.
#
#     scripts/gpu_check.sh                 # on the GPU machine
#     scripts/gpu_check.sh --small         # toy sizes, end to end (on a CPU: no cuda tests exist there)
#     scripts/gpu_check.sh --paper-minutes 10   # instead of the figures: the paper-scale sweep in 10 minutes
#
# Wheels in .whl/ (packages the machine lacks, lark among them) are installed into /tmp/site first.
set -u
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
OUT="${OUT:-$PWD/gpu_out}"
TOTAL="${GPU_CHECK_SECONDS:-290}"   # the whole check's seconds
TESTS="${GPU_CHECK_TEST_SECONDS:-120}"  # at most this for the tests
mkdir -p "$OUT"
start=$(date +%s)
if compgen -G ".whl/*.whl" > /dev/null; then
    "$PYTHON" -m pip install --quiet --no-deps --target /tmp/site .whl/*.whl || echo "pip install of .whl/ failed" >&2
fi
export PYTHONPATH="/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-4}"

case " $* " in
    *" --paper-minutes "*) exec "$PYTHON" bench/gpu_check.py --out "$OUT" "$@" ;;
esac

# 1. the tests that run a model, train or measure, on the cuda parameter (generated only with a GPU)
files=$(grep -rlE "device: str|\(device\)|, device\)" tests --include "test_*.py" | sort)
parallel=""
if "$PYTHON" -c "import xdist" 2> /dev/null; then parallel="-n 4"; fi
# shellcheck disable=SC2086
timeout "$TESTS" "$PYTHON" -m pytest -o addopts="--import-mode=importlib" -p no:cacheprovider -q $parallel \
    -k cuda --junitxml "$OUT/cuda_tests.xml" $files > "$OUT/cuda_tests.log" 2>&1
echo "cuda tests: exit $? ($(tail -1 "$OUT/cuda_tests.log"))"

# 2. the figures, in the time left
left=$(( TOTAL - ($(date +%s) - start) - 10 ))
"$PYTHON" bench/gpu_check.py --out "$OUT" --budget "$left" --tests "$OUT/cuda_tests.xml" "$@" > "$OUT/gpu_check.log" 2>&1
code=$?
echo "figures: exit $code, $OUT/gpu_check.json ($(( $(date +%s) - start )) s in all)"
exit $code
