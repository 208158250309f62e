"""Evaluation stand-in: fails until a file named `evaluation-fixed` exists next to it (a bug, then its fix)."""

import json
import os

here = os.path.dirname(os.path.abspath(__file__))
if not os.path.exists(os.path.join(here, "evaluation-fixed")):
    raise RuntimeError("evaluation bug: metrics cannot be computed yet")
with open(os.path.join(os.environ["SM_CHANNEL_MODEL"], "model.json")) as handle:
    model = json.load(handle)
out = os.environ.get("TRAINOPS_EVALUATION_DIR") or os.environ["SM_OUTPUT_DATA_DIR"]
with open(os.path.join(out, "metrics.json"), "w") as handle:
    json.dump({"accuracy": 0.9, "files": len(model["trained_on"])}, handle)
