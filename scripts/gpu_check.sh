#!/usr/bin/env bash
# The GPU path on a real device, in one command: the tests marked `gpu` (tests/test_gpu.py and the
# gpu tests of test_kernels.py, test_backend.py and test_sizing.py). Kernels against NumPy, the model's logits against
# convnet.reference, lab 00's roofline figure against the datasheet, and -- where Ray and nbgrader
# are installed -- Ray's GPU scheduling, every lab graded, and calibrate. Figures go to
# $GPU_CHECK_OUT/gpu-check.json (default: $OUT where the device tool sets it, else build/gpu-check).
#
#   scripts/gpu_check.sh                  run everything the machine can run; extra args go to pytest
#   scripts/gpu_check.sh -m "gpu and not grading"   the quick part only (a few minutes of device time)
#   scripts/gpu_check.sh --prepare        here, with network: download pytest's wheels into build/gpu-wheels
#                                         for a machine without pytest (carry that folder there)
#
# Where no CUDA device is visible every test skips with the reason, and the script exits 0.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
WHEELS="${GPU_CHECK_WHEELS:-build/gpu-wheels}"
PY="${PYTHON:-python3}"

if [[ "${1:-}" == "--prepare" ]]; then
    # pure-Python wheels: pytest and what it imports, and pytest-timeout (pyproject sets `timeout`)
    exec "$PY" -m pip download --quiet --only-binary=:all: --no-deps -d "$WHEELS" \
        pytest pluggy iniconfig packaging pygments pytest-timeout
fi

export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export GPU_CHECK_OUT="${GPU_CHECK_OUT:-${OUT:-build/gpu-check}}"
mkdir -p "$GPU_CHECK_OUT"

if ! "$PY" -c "import pytest" 2>/dev/null; then
    if ! compgen -G "$WHEELS/*.whl" >/dev/null; then
        echo "gpu_check: pytest is not installed and $WHEELS holds no wheels: run scripts/gpu_check.sh --prepare" \
             "where there is network, and bring $WHEELS along" >&2
        exit 2
    fi
    "$PY" -m pip install --quiet --disable-pip-version-check --no-index --no-deps --target build/gpu-site \
        "$WHEELS"/*.whl || exit 2
    export PYTHONPATH="$ROOT/build/gpu-site:$PYTHONPATH"
fi

why=$("$PY" -c "from course import backend; print(backend.gpu_status()[1])")
if "$PY" -c "from course import backend; raise SystemExit(0 if backend.gpu_status()[0] else 1)"; then
    echo "gpu_check: $why"
else
    echo "gpu_check: no device, every GPU test skips: $why"
fi
for tool in ray nbgrader; do
    "$PY" -c "import importlib.util as u, sys; sys.exit(u.find_spec('$tool') is None)" \
        || echo "gpu_check: $tool is not installed: its checks skip"
done

env -u COURSE_BACKEND "$PY" -m pytest -m gpu -p no:cacheprovider tests/test_gpu.py tests/test_kernels.py \
    tests/test_backend.py tests/test_sizing.py "$@"
rc=$?
if [[ -f "$GPU_CHECK_OUT/gpu-check.json" ]]; then
    echo "gpu_check: figures in $GPU_CHECK_OUT/gpu-check.json:"
    cat "$GPU_CHECK_OUT/gpu-check.json"
fi
exit $rc
