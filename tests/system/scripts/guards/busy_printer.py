"""A training stand-in that keeps printing (it never stalls) for a long time: only a budget or a limit ends it."""

import os
import time

for step in range(int(os.environ.get("STEPS", "600"))):
    print(f"step {step}", flush=True)
    time.sleep(float(os.environ.get("STEP_SECONDS", "0.5")))
