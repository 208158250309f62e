"""Prints a line every TICK seconds (default 0.5) for SECONDS seconds (default: until stopped), then writes a model."""

import os
import time

start = time.time()
limit = float(os.environ.get("SECONDS", "0") or 0)
count = 0
while not limit or time.time() - start < limit:
    count += 1
    print(f"tick {count} on {os.environ['SM_CURRENT_HOST']}", flush=True)
    time.sleep(float(os.environ.get("TICK", "0.5")))
with open(os.path.join(os.environ["SM_MODEL_DIR"], "ticks.txt"), "w") as handle:
    handle.write(str(count))
