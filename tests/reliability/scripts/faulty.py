"""A training stand-in for the fault tests: no torch, so many jobs fit on two cores.

Every rank prints `started rank R pid P`, then works in steps of STEP_SECONDS, rank 0 writing a checkpoint (step
number, atomically) every CHECKPOINT_EVERY steps and resuming from it; it ends after STEPS steps and rank 0 saves a
model. FAULT=exit:R makes rank R exit with code 3 at step 2; FAULT=hang:R makes rank R stop printing and sleep for
ever (as a rank stuck in a collective does). The other ranks keep stepping (they stand for ranks waiting on it).
"""

import json
import os
import sys
import time

rank = int(os.environ.get("RANK", "0"))
steps = int(os.environ.get("STEPS", "1000000"))
step_seconds = float(os.environ.get("STEP_SECONDS", "0.2"))
every = int(os.environ.get("CHECKPOINT_EVERY", "5"))
fault, _, fault_rank = os.environ.get("FAULT", "").partition(":")
checkpoint_dir = os.environ.get("TRAINOPS_CHECKPOINT_DIR") or os.environ.get("SM_CHECKPOINT_DIR", "/tmp")
checkpoint = os.path.join(checkpoint_dir, "state.json")

print(f"started rank {rank} pid {os.getpid()}", flush=True)
step = 0
if rank == 0 and os.path.exists(checkpoint):
    with open(checkpoint) as handle:
        step = json.load(handle)["step"]
    print(f"resumed at step {step}", flush=True)
while step < steps:
    time.sleep(step_seconds)
    step += 1
    if fault_rank and int(fault_rank) == rank and step == 2:
        if fault == "exit":
            print(f"rank {rank} fails on purpose at step {step}", file=sys.stderr, flush=True)
            sys.exit(3)
        if fault == "hang":
            print(f"rank {rank} hangs at step {step}", flush=True)
            while True:
                time.sleep(3600)
    if rank == 0:
        print(f"step {step}", flush=True)
        if step % every == 0:
            with open(checkpoint + ".tmp", "w") as handle:
                json.dump({"step": step}, handle)
            os.replace(checkpoint + ".tmp", checkpoint)
            print(f"checkpoint {step}", flush=True)
if rank == 0:
    with open(os.path.join(os.environ["SM_MODEL_DIR"], "model.json"), "w") as handle:
        json.dump({"steps": step}, handle)
print(f"rank {rank} done", flush=True)
