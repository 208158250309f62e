"""A rank's test script: joins the job through trainops.runtime.init(), all-reduces its rank + 1, writes what it saw to
the model directory, then fails, dies or sleeps as its arguments say (for the runtime's system tests)."""

import argparse
import json
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

import trainops.runtime as runtime

parser = argparse.ArgumentParser()
parser.add_argument("--fail_rank", type=int, default=-1)
parser.add_argument("--kill_rank", type=int, default=-1)
parser.add_argument("--sleep", type=float, default=0.0)
arguments = parser.parse_args()

context = runtime.init()
total = torch.tensor([float(context.rank + 1)])
if dist.is_initialized():
    dist.all_reduce(total)
seen = {"rank": context.rank, "local_rank": context.local_rank, "world_size": context.world_size,
        "host": context.current_host, "env_host": os.environ.get("SM_CURRENT_HOST"), "sum": total.item(),
        "backend": context.backend, "channels": context.channels, "model_dir": context.model_dir,
        "hyperparameters": context.hyperparameters, "pid": os.getpid()}
os.makedirs(context.model_dir, exist_ok=True)
with open(os.path.join(context.model_dir, f"rank-{context.rank}.json"), "w") as handle:
    json.dump(seen, handle)
print(f"rank {context.rank} of {context.world_size} on {context.current_host}: sum {total.item()}", flush=True)

if context.rank == arguments.fail_rank:
    raise ValueError(f"rank {context.rank} fails on purpose")
if context.rank == arguments.kill_rank:
    print(f"rank {context.rank} is about to be killed", file=sys.stderr, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
time.sleep(arguments.sleep)
runtime.cleanup()
