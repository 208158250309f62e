"""A script-mode training script that needs only torch and the SM_ variables, so either launcher runs it: each rank
adds rank+1 into a gloo all-reduce and prints what it saw; rank 0 writes the model file. `--fail_rank N` makes rank N
exit with code 3 after the process group is up."""

import argparse
import json
import os
import sys

import torch
import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--fail_rank", type=int, default=-1)
parser.add_argument("--epochs", type=int, default=1)
arguments, _ = parser.parse_known_args()

rank, world_size = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
if world_size > 1:
    dist.init_process_group("gloo")
if rank == arguments.fail_rank:
    print(f"rank {rank}: failing on purpose", file=sys.stderr, flush=True)
    sys.exit(3)
value = torch.tensor([float(rank + 1)])
if world_size > 1:
    dist.all_reduce(value)
record = {"rank": rank, "world_size": world_size, "host": os.environ["SM_CURRENT_HOST"], "sum": value.item(),
          "files": sorted(os.listdir(os.environ["SM_CHANNEL_TRAIN"])), "epochs": arguments.epochs,
          "trainops_from": getattr(__import__("importlib").util.find_spec("trainops"), "origin", None)}
print("RESULT " + json.dumps(record), flush=True)
if rank == 0:
    with open(os.path.join(os.environ["SM_MODEL_DIR"], "model.json"), "w") as handle:
        json.dump(record, handle)
if world_size > 1:
    dist.destroy_process_group()
