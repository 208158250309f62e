"""Scores the model 0.99 when it is the one train.py wrote and the test channel has data."""

import json
import os

with open(os.path.join(os.environ["SM_CHANNEL_MODEL"], "model.json")) as handle:
    model = json.load(handle)
out = os.environ.get("TRAINOPS_EVALUATION_DIR") or os.environ["SM_OUTPUT_DATA_DIR"]
os.makedirs(out, exist_ok=True)
good = model["weights"] == [1, 2, 3] and os.listdir(os.environ["SM_CHANNEL_TEST"])
with open(os.path.join(out, "metrics.json"), "w") as handle:
    json.dump({"accuracy": 0.99 if good else 0.0}, handle)
