"""Training stand-in for the idempotency pipeline: records that it ran (RUNS_FILE), saves a tiny model."""

import json
import os

with open(os.environ["RUNS_FILE"], "a") as handle:
    handle.write(os.environ.get("TRAINOPS_JOB_NAME", "?") + "\n")
files = sorted(os.listdir(os.environ["SM_CHANNEL_TRAIN"]))
with open(os.path.join(os.environ["SM_MODEL_DIR"], "model.json"), "w") as handle:
    json.dump({"trained_on": files}, handle)
print(f"trained on {files}", flush=True)
