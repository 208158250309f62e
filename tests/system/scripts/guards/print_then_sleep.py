"""A training stand-in that hangs: it prints once, then sleeps (as a rank stuck in an NCCL collective does)."""

import os
import time

print("step 1 done", flush=True)
time.sleep(float(os.environ.get("SLEEP_SECONDS", "600")))
print("never reached", flush=True)
