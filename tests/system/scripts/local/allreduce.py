"""Each rank adds rank+1 into an all-reduce and reports what it saw (host, sum, channel files) as JSON lines."""

import json
import os

import torch
import torch.distributed as dist

import trainops.runtime

ctx = trainops.runtime.init()
value = torch.tensor([float(ctx.rank + 1)])
if ctx.world_size > 1:
    dist.all_reduce(value)
record = {"rank": ctx.rank, "world_size": ctx.world_size, "host": os.environ["SM_CURRENT_HOST"],
          "sum": value.item(), "files": sorted(os.listdir(ctx.channels["train"]))}
print("RESULT " + json.dumps(record), flush=True)
if ctx.rank == 0:
    with open(os.path.join(ctx.model_dir, "result.json"), "w") as handle:
        json.dump(record, handle)
trainops.runtime.cleanup()
