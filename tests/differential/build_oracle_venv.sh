#!/usr/bin/env bash
# Builds the oracle venv that tests/differential/generate.py runs in: the real SageMaker Python SDK v2 and AWS's
# training toolkits, pinned here and never part of trainops' dependencies (trainops must not import them).
# Idempotent: a venv whose stamp matches the pins is reused. Usage: build_oracle_venv.sh [VENV_DIR]
set -euo pipefail
VENV="${1:-${TRAINOPS_ORACLE_VENV:-$HOME/.cache/trainops-oracle}}"
PYTHON="${PYTHON:-python3.11}"
PINS=(
  "sagemaker==2.257.7"
  "sagemaker-training==5.1.4"
  "sagemaker-pytorch-training==3.0.0"
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
"$VENV/bin/python" -m pip install -q "${PINS[@]}" >&2
echo "${PINS[*]}" > "$STAMP"
echo "$VENV"
