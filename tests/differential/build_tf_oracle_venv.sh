#!/usr/bin/env bash
# Builds the TensorFlow toolkit's oracle venv for tests/differential/generate.py --only tf-launch: AWS's
# sagemaker-tensorflow-training on the sagemaker-training release it pins (<= 4.8.3, so it cannot share the PyTorch
# oracle's venv, which has 5.1.4). The toolkit is installed without its data-science dependencies (numpy < 1.24,
# scipy, pandas, ...): its launch code needs only sagemaker-training, and generate.py gives it a stand-in for
# `tensorflow`, whose import is the only other one (no TensorFlow runs: the launch is captured, not executed).
# Idempotent: a venv whose stamp matches the pins is reused. Usage: build_tf_oracle_venv.sh [VENV_DIR]
set -euo pipefail
VENV="${1:-${TRAINOPS_TF_ORACLE_VENV:-$HOME/.cache/trainops-oracle-tensorflow}}"
PYTHON="${PYTHON:-python3.11}"
PINS=(
  "sagemaker-training==4.8.3"
  "sagemaker-tensorflow-training==20.5.0"
)
STAMP="$VENV/.oracle-pins"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "${PINS[*]}" ]; then
  echo "$VENV"
  exit 0
fi
rm -rf "$VENV"
"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade "pip>=24" >&2
# sagemaker-training compiles a small C extension (gethostname shim): gcc and the Python headers are needed.
"$VENV/bin/python" -m pip install -q "${PINS[0]}" >&2
"$VENV/bin/python" -m pip install -q --no-deps "${PINS[1]}" >&2
echo "${PINS[*]}" > "$STAMP"
echo "$VENV"
