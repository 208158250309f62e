"""The training loop every variant of the GPT example shares (trainops, SMDDP-style and torch.sagemaker-style
scripts): it only uses ``torch.distributed``, so it is the same code under each launcher and library.

Each step: this rank's slice of the global batch, bf16 autocast on GPUs (fp32 on CPU), cross-entropy, backward,
AdamW. Per-step losses are averaged over the ranks at the end (one collective, so measuring costs no step time). Rank
0 writes ``training.json`` (losses, tokens/s, model FLOP/s, peak memory, every rank's identity) to
``--metrics-out`` or the model directory.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from data import Batches, load_corpus
from model import GPT, SIZES, flops_per_token, parameter_count


def parser(description: str) -> argparse.ArgumentParser:
    """The example's options (SageMaker passes hyperparameters as ``--key value``; both spellings work)."""
    options = argparse.ArgumentParser(description=description)
    options.add_argument("--size", choices=sorted(SIZES), default="tiny")
    options.add_argument("--steps", type=int, default=20)
    options.add_argument("--global-batch", "--global_batch", type=int, default=8)
    options.add_argument("--learning-rate", "--learning_rate", type=float, default=3e-3)
    options.add_argument("--seed", type=int, default=1234)
    options.add_argument("--corpus-bytes", "--corpus_bytes", type=int, default=2 * 2**20)
    options.add_argument("--compile", type=_flag, default=False, help="torch.compile the model")
    options.add_argument("--activation-checkpointing", "--activation_checkpointing", type=_flag, default=False)
    options.add_argument("--timing-warmup", "--timing_warmup", type=int, default=None,
                         help="steps left out of the timing (default: a quarter of the steps, at most 10)")
    options.add_argument("--log-every", "--log_every", type=int, default=5)
    options.add_argument("--metrics-out", "--metrics_out", default=None, help="where rank 0 writes training.json")
    options.add_argument("--ddp-bucket-mb", "--ddp_bucket_mb", type=int, default=None,
                         help="DDP bucket size in MB (default: what trainops.runtime.transform() picks)")
    # SageMaker hands an SMP job's parameters to the script as this hyperparameter as well; trainops.runtime reads
    # them from the job itself, so the value is accepted and not used here.
    options.add_argument("--mp-parameters", "--mp_parameters", default=None, help=argparse.SUPPRESS)
    return options


def _flag(text: str) -> bool:
    return str(text).strip().lower() in ("1", "true", "yes", "on")


def build_model(args: argparse.Namespace, device: torch.device) -> GPT:
    """The same initial weights on every rank: seeded, built on CPU (so CPU and GPU runs start alike), then moved."""
    torch.manual_seed(args.seed)
    return GPT(SIZES[args.size]).to(device)


def _rank_identity(rank: int, local_rank: int) -> dict:
    return {"rank": rank, "local_rank": local_rank, "host": os.environ.get("SM_CURRENT_HOST", socket.gethostname()),
            "ompi_rank": int(os.environ["OMPI_COMM_WORLD_RANK"]) if "OMPI_COMM_WORLD_RANK" in os.environ else None,
            "pid": os.getpid()}


def train(model: torch.nn.Module, args: argparse.Namespace, device: torch.device, dp_rank: int, dp_size: int,
          local_rank: int = 0, model_dir: str = ".", mode: str = "", extra: dict | None = None) -> dict | None:
    """Train for ``args.steps`` steps on shard ``dp_rank`` of ``dp_size``; returns (on rank 0) what it wrote."""
    config = SIZES[args.size]
    distributed = dist.is_available() and dist.is_initialized()
    rank = dist.get_rank() if distributed else 0
    world = dist.get_world_size() if distributed else 1
    corpus = load_corpus(os.environ.get("SM_CHANNEL_TRAIN"), args.corpus_bytes)
    batches = Batches(corpus, config.seq_len, args.global_batch, args.seed)
    cuda = device.type == "cuda"
    parameters = [parameter for parameter in model.parameters() if parameter.requires_grad]
    sharded = any(type(parameter).__name__ == "DTensor" for parameter in parameters)
    # Fused AdamW on GPUs, DTensors included (FSDP2's foreach step took 2.5x the fused one's time per parameter on
    # H200s, issue 18). On CPU DTensors take foreach, which, like fused, refuses a DTensor / plain-tensor mix (a
    # per-tensor step would hide one).
    optimizer = torch.optim.AdamW(parameters, lr=args.learning_rate, betas=(0.9, 0.95), weight_decay=0.0,
                                  fused=True if cuda else None, foreach=True if sharded and not cuda else None)
    step_model = torch.compile(model) if args.compile else model
    warmup = args.timing_warmup if args.timing_warmup is not None else min(10, args.steps // 4)
    losses = torch.zeros(args.steps, dtype=torch.float32, device=device)
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    started = time.perf_counter()
    timed_from = started
    for step in range(args.steps):
        inputs, targets = batches.batch(step, dp_rank, dp_size)
        if cuda:
            # From pinned memory the copy is queued behind the running step instead of waiting for it to finish.
            inputs, targets = (tensor.pin_memory().to(device, non_blocking=True) for tensor in (inputs, targets))
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=cuda):
            logits = step_model(inputs)
        loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.reshape(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses[step] = loss.detach()
        if step + 1 == warmup:
            if cuda:
                torch.cuda.synchronize(device)
            timed_from = time.perf_counter()
        if rank == 0 and args.log_every and ((step + 1) % args.log_every == 0 or step == 0) and not cuda:
            print(f"step {step + 1}/{args.steps} loss {loss.item():.6f}", flush=True)
    if cuda:
        torch.cuda.synchronize(device)
    ended = time.perf_counter()
    if distributed:
        # Every rank's losses summed, then divided by the ranks: the mean over the whole global batch (the ranks
        # of a tensor-parallel group hold the same loss, so they count alike).
        dist.all_reduce(losses)
        losses /= world
    peak = torch.cuda.max_memory_allocated(device) / 2**30 if cuda else 0.0
    peaks = [peak]
    identities = [_rank_identity(rank, local_rank)]
    if distributed:
        peaks = [None] * world
        identities = [None] * world
        dist.all_gather_object(peaks, peak)
        dist.all_gather_object(identities, _rank_identity(rank, local_rank))
    if rank != 0:
        return None
    timed_steps = args.steps - warmup
    seconds = ended - timed_from
    tokens = timed_steps * args.global_batch * config.seq_len
    per_second = tokens / seconds if timed_steps > 0 and seconds > 0 else 0.0
    result = {
        "mode": mode,
        "size": args.size,
        "steps": args.steps,
        "global_batch": args.global_batch,
        "seq_len": config.seq_len,
        "losses": [float(value) for value in losses.cpu()],
        "world_size": world,
        "dp_size": dp_size,
        "backend": dist.get_backend() if distributed else None,
        "device": str(device),
        "parameters": parameter_count(config),
        "flops_per_token": flops_per_token(config),
        "timed_steps": timed_steps,
        "timed_seconds": seconds,
        "total_seconds": ended - started,
        "tokens_per_second": per_second,
        "model_flops_per_second": per_second * flops_per_token(config),
        "peak_memory_gib": max(peaks),
        "ranks": identities,
        "compile": bool(args.compile),
        "parameter_types": sorted({type(parameter).__name__ for parameter in parameters}),
        # What the launcher passed down: NVLink multicast must stay off on shared GPU hosts.
        "environment": {name: os.environ.get(name) for name in
                        ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS")},
        "gpu": torch.cuda.get_device_name(device) if cuda else None,
        **(extra or {}),
    }
    path = args.metrics_out or os.path.join(model_dir, "training.json")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(result, handle, indent=1)
    print(f"final loss {result['losses'][-1]:.6f}; {per_second:,.0f} tokens/s, "
          f"{result['model_flops_per_second'] / 1e12:.1f} model TFLOP/s, peak {max(peaks):.2f} GiB; wrote {path}",
          flush=True)
    return result
