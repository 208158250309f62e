"""Plain data-parallel baseline (issue 18): the GPT example's model, data and step in a minimal script with no
trainops import, under ``torchrun``. With no options it is ``DistributedDataParallel`` with its default options
around the model and ``torch.compile`` around that (``--compile``), the way the PyTorch tutorials write it; the
options switch one knob at a time, so ``bench/ddp_profile.py`` can tell what each costs:

- ``--wrap ddp`` (default), ``none`` (no wrapper, one process only) or ``fsdp2`` (``fully_shard`` on every block and
  on the root over all ranks, as trainops' ``hybrid_shard_degree`` = world size does);
- DDP: ``--bucket-cap-mb``, ``--gradient-as-bucket-view``, ``--static-graph``;
- FSDP2: ``--reshard-after-forward``, ``--param-dtype bf16`` (MixedPrecisionPolicy, fp32 reduce), ``--prefetch N``
  (explicit forward/backward prefetch of the next N blocks);
- compile: ``--compile`` (``torch.compile`` of the wrapped model: Dynamo's DDPOptimizer splits the graph at bucket
  boundaries; ``--optimize-ddp false`` keeps one graph), ``--compile-blocks`` (each block compiled before wrapping), ``--compiled-autograd`` (the backward
  traced too; DDP's all-reduces through the Python reducer);
- ``--profile-steps N``: after the timed steps, N more under ``torch.profiler``; rank 0 writes a summary (GPU busy,
  NCCL kernel time and the part of it no compute kernel overlaps, host syncs, data and optimizer time) into the
  metrics file, and the raw trace only where ``--trace`` says.

The metrics file (``--metrics-out``, rank 0) has the fields bench/gpu.py reads from the example's training.json.

    torchrun --standalone --nproc_per_node 2 bench/plain_ddp.py --size 250m --global-batch 64 --compile true
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "gpt"))

from data import Batches, load_corpus  # noqa: E402
from model import GPT, SIZES, flops_per_token, parameter_count  # noqa: E402
from profile_summary import summarise_trace  # noqa: E402


def _flag(text: str) -> bool:
    value = str(text).strip().lower()
    if value not in ("1", "true", "yes", "on", "0", "false", "no", "off"):
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    return value in ("1", "true", "yes", "on")


def options() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="tiny")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--timing-warmup", "--timing_warmup", type=int, default=15)
    parser.add_argument("--global-batch", "--global_batch", type=int, default=8)
    parser.add_argument("--learning-rate", "--learning_rate", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--corpus-bytes", "--corpus_bytes", type=int, default=8 * 2**20)
    parser.add_argument("--compile", type=_flag, default=False)
    parser.add_argument("--compile-blocks", type=_flag, default=False)
    parser.add_argument("--compiled-autograd", type=_flag, default=False)
    parser.add_argument("--optimize-ddp", type=_flag, default=True,
                        help="false: Dynamo keeps the DDP model one graph (no split per bucket); the compiled "
                             "backward then hands every gradient to DDP at its end, so no all-reduce overlaps it")
    parser.add_argument("--wrap", choices=("ddp", "none", "fsdp2"), default="ddp")
    parser.add_argument("--bucket-cap-mb", type=float, default=None)
    parser.add_argument("--gradient-as-bucket-view", type=_flag, default=False)
    parser.add_argument("--static-graph", type=_flag, default=False)
    parser.add_argument("--reshard-after-forward", type=_flag, default=True)
    parser.add_argument("--param-dtype", choices=("fp32", "bf16"), default="fp32")
    parser.add_argument("--prefetch", type=int, default=0)
    parser.add_argument("--optimizer", choices=("fused", "foreach"), default="fused",
                        help="AdamW's implementation on GPUs (CPU: foreach for FSDP2, per tensor otherwise)")
    parser.add_argument("--profile-steps", type=int, default=0)
    parser.add_argument("--trace", default=None, help="keep the raw chrome trace here (rank 0)")
    parser.add_argument("--metrics-out", "--metrics_out", default="plain-ddp.json")
    parser.add_argument("--log-every", "--log_every", type=int, default=0, help="accepted, unused")
    return parser


def wrap(model: torch.nn.Module, args: argparse.Namespace, device: torch.device, world: int) -> torch.nn.Module:
    if args.compile_blocks:
        for block in model.blocks:
            block.compile()
    if args.wrap == "none":
        if world > 1:
            raise SystemExit("--wrap none runs one process only")
        return model
    if args.wrap == "fsdp2":
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        mesh = init_device_mesh(device.type, (world,))
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16 if args.param_dtype == "bf16" else None,
                                      reduce_dtype=torch.float32)
        for block in model.blocks:
            fully_shard(block, mesh=mesh, reshard_after_forward=args.reshard_after_forward, mp_policy=policy)
        fully_shard(model, mesh=mesh, reshard_after_forward=args.reshard_after_forward, mp_policy=policy)
        if args.prefetch:
            blocks = list(model.blocks)
            for index, block in enumerate(blocks):
                block.set_modules_to_forward_prefetch(blocks[index + 1:index + 1 + args.prefetch])
                block.set_modules_to_backward_prefetch(blocks[max(0, index - args.prefetch):index][::-1])
        return model
    from torch.nn.parallel import DistributedDataParallel

    knobs = {}
    if args.bucket_cap_mb is not None:
        knobs["bucket_cap_mb"] = args.bucket_cap_mb
    if args.gradient_as_bucket_view:
        knobs["gradient_as_bucket_view"] = True
    if args.static_graph:
        knobs["static_graph"] = True
    ids = [device.index] if device.type == "cuda" else None
    return DistributedDataParallel(model, device_ids=ids, **knobs)


def main() -> None:
    args = options().parse_args()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    cuda = torch.cuda.is_available()
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    distributed = world > 1 or args.wrap != "none"
    if distributed:
        dist.init_process_group("nccl" if cuda else "gloo")
    if args.compiled_autograd:
        from torch._dynamo import config as dynamo_config

        dynamo_config.compiled_autograd = True
        dynamo_config.optimize_ddp = "python_reducer"
    elif not args.optimize_ddp:
        from torch._dynamo import config as dynamo_config

        dynamo_config.optimize_ddp = False
    config = SIZES[args.size]
    torch.manual_seed(args.seed)
    model = GPT(config).to(device)
    model = wrap(model, args, device, world)
    batches = Batches(load_corpus(None, args.corpus_bytes), config.seq_len, args.global_batch, args.seed)
    parameters = [parameter for parameter in model.parameters() if parameter.requires_grad]
    sharded = args.wrap == "fsdp2"
    fused = cuda and args.optimizer == "fused"
    optimizer = torch.optim.AdamW(parameters, lr=args.learning_rate, betas=(0.9, 0.95), weight_decay=0.0,
                                  fused=True if fused else None,
                                  foreach=True if not fused and (sharded or args.optimizer == "foreach") else None)
    step_model = torch.compile(model) if args.compile else model
    losses = torch.zeros(args.steps + args.profile_steps, device=device)

    def step(index: int) -> None:
        with torch.profiler.record_function("data"):
            inputs, targets = batches.batch(index, rank, world)
            if cuda:
                inputs, targets = (tensor.pin_memory().to(device, non_blocking=True) for tensor in (inputs, targets))
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=cuda):
            logits = step_model(inputs)
        loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.reshape(-1))
        loss.backward()
        with torch.profiler.record_function("optimizer"):
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        losses[index] = loss.detach()

    def synchronize() -> None:
        if cuda:
            torch.cuda.synchronize(device)

    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    started = time.perf_counter()
    timed_from = started
    for index in range(args.steps):
        step(index)
        if index + 1 == args.timing_warmup:
            synchronize()
            timed_from = time.perf_counter()
    synchronize()
    ended = time.perf_counter()
    summary = None
    if args.profile_steps:
        activities = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if cuda else [])
        with torch.profiler.profile(activities=activities) as profiler:
            for index in range(args.steps, args.steps + args.profile_steps):
                with torch.profiler.record_function("step"):
                    step(index)
            synchronize()
        if rank == 0:
            with tempfile.TemporaryDirectory() as directory:
                path = args.trace or os.path.join(directory, "trace.json")
                profiler.export_chrome_trace(path)
                summary = summarise_trace(path, args.profile_steps)
    if distributed:
        dist.all_reduce(losses)
        losses /= world
    peak = torch.cuda.max_memory_allocated(device) / 2**30 if cuda else 0.0
    if distributed:
        peaks = [None] * world
        dist.all_gather_object(peaks, peak)
        peak = max(peaks)
    if rank == 0:
        timed_steps = args.steps - args.timing_warmup
        seconds = ended - timed_from
        rate = timed_steps * args.global_batch * config.seq_len / seconds if timed_steps > 0 else 0.0
        result = {"mode": f"plain:{args.wrap}", "size": args.size, "steps": args.steps,
                  "global_batch": args.global_batch, "seq_len": config.seq_len, "world_size": world,
                  "dp_size": world, "losses": [float(value) for value in losses[:args.steps].cpu()],
                  "parameters": parameter_count(config), "flops_per_token": flops_per_token(config),
                  "timed_steps": timed_steps, "timed_seconds": seconds, "tokens_per_second": rate,
                  "model_flops_per_second": rate * flops_per_token(config), "peak_memory_gib": peak,
                  "compile": args.compile, "knobs": {key: value for key, value in vars(args).items()
                                                     if key not in ("metrics_out", "trace")},
                  "profile": summary, "gpu": torch.cuda.get_device_name(device) if cuda else None,
                  "environment": {name: os.environ.get(name) for name in
                                  ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS",
                                   "NCCL_MAX_CTAS")}}
        with open(args.metrics_out, "w", encoding="utf-8") as handle:
            json.dump(result, handle, indent=1)
        print(f"{result['mode']} world {world}: {rate:,.0f} tokens/s, peak {peak:.2f} GiB; wrote {args.metrics_out}",
              flush=True)
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
