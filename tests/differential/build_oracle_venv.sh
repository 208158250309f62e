#!/usr/bin/env bash
# Builds an oracle venv that tests/differential/generate.py runs in, pinned here and never part of trainops'
# dependencies (trainops must not import them):
#   (default)     the real SageMaker Python SDK v2 and AWS's PyTorch training toolkit;
#   --tensorflow  AWS's sagemaker-tensorflow-training on the sagemaker-training release it pins (<= 4.8.3, so it
#                 cannot share the PyTorch oracle's venv, which has 5.1.4), for `generate.py --only tf-launch`. The
#                 toolkit goes in without its data-science dependencies (numpy < 1.24, scipy, pandas, ...): its launch
#                 code needs only sagemaker-training, and generate.py gives it a stand-in for `tensorflow` (no
#                 TensorFlow runs: the launch is captured, not executed).
#   --v3          the SageMaker Python SDK v3 (ModelTrainer, `sagemaker.train`), for `generate_v3.py` and for
#                 `regenerate_tables.py` (the newest SDK's image_uri_config); its own venv, as v3 replaces v2's modules.
# Idempotent: a venv whose stamp matches the pins is reused. Usage: build_oracle_venv.sh [--tensorflow|--v3] [VENV_DIR]
set -euo pipefail
if [ "${1:-}" = "--tensorflow" ]; then
  shift
  VENV="${1:-${TRAINOPS_TF_ORACLE_VENV:-$HOME/.cache/trainops-oracle-tensorflow}}"
  PINS=("sagemaker-training==4.8.3")
  NO_DEPS=("sagemaker-tensorflow-training==20.5.0")
elif [ "${1:-}" = "--v3" ]; then
  shift
  VENV="${1:-${TRAINOPS_V3_ORACLE_VENV:-$HOME/.cache/trainops-oracle-v3}}"
  PINS=("sagemaker==3.27.0")
  NO_DEPS=()
else
  VENV="${1:-${TRAINOPS_ORACLE_VENV:-$HOME/.cache/trainops-oracle}}"
  PINS=("sagemaker==2.257.7" "sagemaker-training==5.1.4" "sagemaker-pytorch-training==3.0.0")
  NO_DEPS=()
fi
PYTHON="${PYTHON:-python3.11}"
STAMP="$VENV/.oracle-pins"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "${PINS[*]}${NO_DEPS[*]:+ ${NO_DEPS[*]}}" ]; then
  echo "$VENV"
  exit 0
fi
rm -rf "$VENV"
"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade "pip>=24" >&2
# sagemaker-training compiles a small C extension (gethostname shim): gcc and the Python headers are needed.
"$VENV/bin/python" -m pip install -q "${PINS[@]}" >&2
if [ "${#NO_DEPS[@]}" -gt 0 ]; then
  "$VENV/bin/python" -m pip install -q --no-deps "${NO_DEPS[@]}" >&2
fi
echo "${PINS[*]}${NO_DEPS[*]:+ ${NO_DEPS[*]}}" > "$STAMP"
echo "$VENV"
