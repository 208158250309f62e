"""A 2-node DDP or MPI rank (gloo): all-reduces rank+1 and reports the SageMaker contract it sees, as one JSON line."""

import json
import os
import sys

import torch
import torch.distributed as dist

import trainops.runtime

ctx = trainops.runtime.init()
value = torch.tensor([float(ctx.rank + 1)])
dist.all_reduce(value)
base = os.environ["SAGEMAKER_BASE_DIR"]
with open(os.path.join(base, "input", "config", "resourceconfig.json")) as handle:
    resources = json.load(handle)
with open(os.path.join(base, "input", "config", "hyperparameters.json")) as handle:
    hyperparameters = json.load(handle)
record = {
    "rank": ctx.rank, "world_size": ctx.world_size, "sum": value.item(), "node": os.environ.get("SLURMD_NODENAME"),
    "current_host": resources["current_host"], "hosts": resources["hosts"], "sm_current_host": os.environ["SM_CURRENT_HOST"],
    "sm_hosts": json.loads(os.environ["SM_HOSTS"]), "channels": json.loads(os.environ["SM_CHANNELS"]),
    "train_files": sorted(os.listdir(os.environ["SM_CHANNEL_TRAIN"])), "model_dir": os.environ["SM_MODEL_DIR"],
    "output_data_dir": os.environ["SM_OUTPUT_DATA_DIR"], "hp_epochs": os.environ.get("SM_HP_EPOCHS"),
    "hyperparameters": hyperparameters, "argv": sys.argv[1:], "checkpoint_dir": ctx.checkpoint_dir,
    # Under mpirun: Open MPI's and PMIx's view of the rank (absent under torchrun).
    "ompi_rank": os.environ.get("OMPI_COMM_WORLD_RANK"), "ompi_size": os.environ.get("OMPI_COMM_WORLD_SIZE"),
    "ompi_local_rank": os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK"), "pmix_rank": os.environ.get("PMIX_RANK"),
}
print("CONTRACT " + json.dumps(record), flush=True)
if ctx.rank == 0:
    with open(os.path.join(ctx.model_dir, "model.json"), "w") as handle:
        json.dump({"sum": value.item()}, handle)
trainops.runtime.cleanup()
