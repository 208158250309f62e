"""Both hosts advance in lock step through the shared checkpoint directory, as ranks do through a collective: a host
that vanishes holds the other one at the next step. Host algo-1 checkpoints each step both reached; a new attempt
resumes after the last checkpoint. SECONDS_PER_STEP and STEPS pace it."""

import json
import os
import time

host = os.environ["SM_CURRENT_HOST"]
hosts = json.loads(os.environ["SM_HOSTS"])
attempt = os.environ["TRAINING_JOB_NAME"]
checkpoints = os.environ["TRAINOPS_CHECKPOINT_DIR"]
state_path = os.path.join(checkpoints, "state.json")


def progress(name):
    try:
        with open(os.path.join(checkpoints, f"progress-{attempt}-{name}")) as handle:
            return int(handle.read() or 0)
    except (OSError, ValueError):
        return -1


def write(path, text):
    with open(path + ".tmp", "w") as handle:
        handle.write(text)
    os.replace(path + ".tmp", path)


step = 0
if os.path.exists(state_path):
    with open(state_path) as handle:
        step = json.load(handle)["step"]
    print(f"resumed after step {step}", flush=True)
while step < int(os.environ.get("STEPS", "8")):
    step += 1
    time.sleep(float(os.environ.get("SECONDS_PER_STEP", "0.5")))
    write(os.path.join(checkpoints, f"progress-{attempt}-{host}"), str(step))
    while any(progress(name) < step for name in hosts):
        time.sleep(0.05)
    if host == hosts[0]:
        write(state_path, json.dumps({"step": step}))
    print(f"step {step}", flush=True)
with open(os.path.join(os.environ["SM_MODEL_DIR"], "steps.txt"), "w") as handle:
    handle.write(str(step))
