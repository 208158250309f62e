"""Rank FAIL_RANK raises after a short pause; the others wait in a collective (as real ranks would) until stopped."""

import os
import time

import torch
import torch.distributed as dist

import trainops.runtime

ctx = trainops.runtime.init()
print(f"started rank {ctx.rank} pid {os.getpid()}", flush=True)
if ctx.rank == int(os.environ.get("FAIL_RANK", "-1")):
    time.sleep(1.0)
    raise RuntimeError(f"planted failure in rank {ctx.rank}")
if ctx.world_size > 1:
    dist.all_reduce(torch.ones(1))  # blocks: the failed rank never joins
time.sleep(float(os.environ.get("SLEEP", "0")))
