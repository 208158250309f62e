"""Train the digits classifier with DDP on every rank the job has (simulated hosts locally, instances on SageMaker).

`trainops.runtime.init()` sets up the process group (gloo on CPU, nccl on GPUs) from torchrun's or Open MPI's
environment and says where the data, the model directory and the checkpoints are. The same script runs locally, on
one GPU and on a SageMaker fleet. It checkpoints every epoch and resumes from the last checkpoint when re-run.
"""

import argparse
import json
import os
import time

import numpy as np
import torch
import torch.nn.functional as F
from model import DigitsNet
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

import trainops.runtime


def load(directory: str) -> TensorDataset:
    data = np.load(os.path.join(directory, "digits.npz"))
    return TensorDataset(torch.from_numpy(data["images"]).unsqueeze(1), torch.from_numpy(data["labels"]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--batch-size", "--batch_size", type=int, default=32)
    parser.add_argument("--learning-rate", "--learning_rate", type=float, default=2e-3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    ctx = trainops.runtime.init()
    torch.manual_seed(args.seed)
    dataset = load(ctx.channels["train"])
    sampler = DistributedSampler(dataset, num_replicas=ctx.dp_size, rank=ctx.dp_rank, shuffle=True, seed=args.seed)
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)
    model = DigitsNet().to(ctx.device)
    if ctx.world_size > 1:
        model = DistributedDataParallel(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.learning_rate)

    checkpoint = os.path.join(ctx.checkpoint_dir, "digits.pt")
    start_epoch, losses = 0, []
    if os.path.exists(checkpoint):
        state = torch.load(checkpoint, map_location="cpu")
        (model.module if ctx.world_size > 1 else model).load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start_epoch, losses = state["epoch"] + 1, state["losses"]
        if ctx.rank == 0:
            print(f"resumed from {checkpoint} after epoch {state['epoch'] + 1}", flush=True)

    started = time.time()
    for epoch in range(start_epoch, args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        total, count = 0.0, 0
        for images, labels in loader:
            images, labels = images.to(ctx.device), labels.to(ctx.device)
            optimizer.zero_grad()
            loss = F.cross_entropy(model(images), labels)
            loss.backward()
            optimizer.step()
            total += loss.item() * len(labels)
            count += len(labels)
        # The epoch's mean loss over every rank, so rank 0 reports the whole job's figure.
        summed = torch.tensor([total, count], dtype=torch.float64)
        if ctx.world_size > 1:
            torch.distributed.all_reduce(summed)
        epoch_loss = (summed[0] / summed[1]).item()
        losses.append(epoch_loss)
        if ctx.rank == 0:
            print(f"epoch {epoch + 1}/{args.epochs} loss {epoch_loss:.4f} "
                  f"(world size {ctx.world_size}, {time.time() - started:.1f} s)", flush=True)
            plain = model.module if ctx.world_size > 1 else model
            temporary = checkpoint + ".tmp"
            torch.save({"model": plain.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch,
                        "losses": losses}, temporary)
            os.replace(temporary, checkpoint)
        if ctx.world_size > 1:
            torch.distributed.barrier()

    if ctx.rank == 0:
        plain = model.module if ctx.world_size > 1 else model
        torch.save(plain.state_dict(), os.path.join(ctx.model_dir, "model.pt"))
        with open(os.path.join(ctx.model_dir, "training.json"), "w") as handle:
            json.dump({"epoch_losses": losses, "world_size": ctx.world_size, "epochs": args.epochs}, handle)
        print(f"saved the model to {ctx.model_dir}", flush=True)
    trainops.runtime.cleanup()


if __name__ == "__main__":
    main()
