"""A tiny real job for the load test: a gloo all-reduce over the job's ranks, a checkpoint, and a model naming the
job, the rendezvous port and the sum, so the test can tell that no two jobs shared a port or a directory."""

import json
import os

import torch
import torch.distributed as dist

import trainops.runtime

ctx = trainops.runtime.init()
job = os.environ["TRAINOPS_JOB_NAME"]
checkpoint = os.path.join(ctx.checkpoint_dir, "owner.json")
if ctx.rank == 0:
    if os.path.exists(checkpoint):
        with open(checkpoint) as handle:
            owner = json.load(handle)["job"]
        if owner != job:
            print(f"CLASH checkpoint directory already holds {owner}'s checkpoint", flush=True)
    with open(checkpoint + ".tmp", "w") as handle:
        json.dump({"job": job}, handle)
    os.replace(checkpoint + ".tmp", checkpoint)
value = torch.tensor([float(ctx.rank + 1)])
dist.all_reduce(value)
if ctx.rank == 0:
    with open(os.path.join(ctx.model_dir, "model.json"), "w") as handle:
        json.dump({"job": job, "port": os.environ.get("MASTER_PORT"), "sum": value.item(),
                   "world_size": ctx.world_size}, handle)
print(f"RESULT rank {ctx.rank} sum {value.item()}", flush=True)
trainops.runtime.cleanup()
