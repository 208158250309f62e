"""Counts steps into a checkpoint file; with CRASH_AT=N it exits with an error right after checkpointing step N."""

import json
import os
import sys

import trainops.runtime

ctx = trainops.runtime.init()
path = os.path.join(ctx.checkpoint_dir, "state.json")
state = {"step": 0}
if os.path.exists(path):
    with open(path) as handle:
        state = json.load(handle)
    print(f"resumed at step {state['step']}", flush=True)
crash_at = int(os.environ.get("CRASH_AT", "0"))
while state["step"] < 6:
    state["step"] += 1
    with open(path + ".tmp", "w") as handle:
        json.dump(state, handle)
    os.replace(path + ".tmp", path)
    print(f"step {state['step']}", flush=True)
    if state["step"] == crash_at:
        sys.exit(3)
with open(os.path.join(ctx.model_dir, "steps.txt"), "w") as handle:
    handle.write(str(state["step"]))
