"""Multi-GPU scaling benchmark (issue 9): the GPT example (~255 M parameters, bf16, sequence 1024) through
``trainops run`` on the local backend, NCCL, on every GPU count up to what the machine has.

1. DDP on 1, 2, 4, 8 GPUs (the counts up to ``--gpus``, default all visible), the same batch per GPU: tokens/s and
   scaling efficiency ``tokens/s(N) / (N x tokens/s(1))``;
   next to them, the plain-DDP baseline (issue 18) at the same counts: bench/plain_ddp.py, the same model, batch and
   compile setting in a minimal script with no trainops import and ``DistributedDataParallel`` with default
   options, under plain torchrun; so the table separates what the example and ``transform()`` cost from what DDP
   costs;
2. at the largest count, the DDP run alternating (ABBA) with the same script under plain
   ``torchrun --standalone --nproc_per_node N``: the ratio. The smaller counts run once per round, between those
   pairs, so the 1-GPU denominator of the scaling efficiency is a median over the same rounds, not one run;
   ``--ddp-bucket-mb 200,...`` adds runs at the largest count with other DDP bucket sizes through ``transform()``;
3. FSDP2 through SMP v2 parameters (``hybrid_shard_degree`` = all GPUs, compiled like the DDP runs) and tensor
   parallel degree 2 (eager) on the same machine: tokens/s, peak memory per GPU, and the ratio to DDP's tokens/s;
4. an all-reduce bus-bandwidth probe (the health check's, through torch.distributed) against NCCL called directly
   (CuPy's NCCL bindings) for the same message size.

Targets (issue 18): DDP scaling efficiency >= 0.95 at 2 GPUs through ``transform()`` and never below the plain-DDP
baseline of the same run; FSDP2 within 10 % of DDP's tokens/s; trainops/torchrun >= 0.98. NVLink multicast stays off
in every child (``NCCL_NVLS_ENABLE=0``, ``TORCH_SYMM_MEM_DISABLE_MULTICAST=1``, ``NVSHMEM_DISABLE_NVLS=1``; each run
records what its ranks saw).

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \\
        python bench/multi_gpu.py --out /tmp/bench-multi-gpu.json

Any GPU count works (``--gpus 8`` on an 8-GPU host runs 1, 2, 4, 8). With no GPU, ``--size tiny --no-compile
--gpus 2`` runs the same sequence over gloo processes on the CPU (a check of the script; the probes are skipped).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu import NVLS_OFF, environment, hyperparameters, in_turn, run_torchrun, run_trainops  # noqa: E402

PROBE_BYTES = 256 * 2**20


def _nccl_worker(rank: int, world: int, unique_id, nbytes: int, iterations: int, directory: str) -> None:
    import cupy
    from cupy.cuda import nccl

    cupy.cuda.Device(rank).use()
    communicator = nccl.NcclCommunicator(world, unique_id, rank)
    buffer = cupy.ones(nbytes // 4, dtype=cupy.float32)
    stream = cupy.cuda.Stream(non_blocking=True)

    def all_reduce() -> None:
        communicator.allReduce(buffer.data.ptr, buffer.data.ptr, buffer.size, nccl.NCCL_FLOAT32, nccl.NCCL_SUM,
                               stream.ptr)

    for _ in range(5):  # warm-up; the collectives also line the ranks up
        all_reduce()
    stream.synchronize()
    started = time.perf_counter()
    for _ in range(iterations):
        all_reduce()
    stream.synchronize()
    with open(os.path.join(directory, f"rank{rank}.json"), "w", encoding="utf-8") as handle:
        json.dump({"seconds": time.perf_counter() - started}, handle)


def nccl_busbw(gpus: int, nbytes: int = PROBE_BYTES, iterations: int = 20) -> dict:
    """All-reduce bandwidth of NCCL itself (CuPy's bindings, no torch), one process per GPU: the reference figure
    for the health check's probe at the same size."""
    import multiprocessing

    from cupy.cuda import nccl

    unique_id = nccl.get_unique_id()
    context = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory() as directory:
        workers = [context.Process(target=_nccl_worker, args=(rank, gpus, unique_id, nbytes, iterations, directory))
                   for rank in range(gpus)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        if any(worker.exitcode for worker in workers):
            raise RuntimeError(f"NCCL probe workers exited {[worker.exitcode for worker in workers]}")
        seconds = max(json.load(open(os.path.join(directory, f"rank{rank}.json")))["seconds"]
                      for rank in range(gpus)) / iterations
    algbw = nbytes / seconds / 1e9
    return {"bytes": nbytes, "gpus": gpus, "seconds": seconds, "algbw_gbps": algbw,
            "busbw_gbps": algbw * 2 * (gpus - 1) / gpus}


def run_plain(scratch: Path, label: str, processes: int, args: argparse.Namespace, env: dict[str, str]) -> dict:
    """bench/plain_ddp.py (no trainops: the model, data and step in a minimal script, ``DistributedDataParallel``
    with default options, the same compile setting) under plain ``torchrun``: what DDP itself costs."""
    metrics = scratch / f"{label}.json"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(processes),
               str(Path(__file__).resolve().parent / "plain_ddp.py"), "--size", args.size, "--steps",
               str(args.steps), "--timing-warmup", str(args.timing_warmup), "--global-batch",
               str(args.batch_per_gpu * processes), "--compile", str(args.compile), "--metrics-out", str(metrics)]
    started = time.perf_counter()
    completed = subprocess.run(command, env=env, cwd=str(scratch), capture_output=True, text=True, check=False)
    if completed.returncode != 0 or not metrics.exists():
        tail = "\n".join((completed.stdout + completed.stderr).splitlines()[-25:])
        raise RuntimeError(f"plain DDP {label} failed (exit {completed.returncode}):\n{tail}")
    result = json.loads(metrics.read_text(encoding="utf-8"))
    result.update(launcher="torchrun", label=label, wall_seconds=time.perf_counter() - started)
    return result


def gpu_counts(largest: int) -> list[int]:
    """1, 2, 4, 8, ... up to ``largest``, and ``largest`` itself."""
    counts, count = [], 1
    while count < largest:
        counts.append(count)
        count *= 2
    return counts + [largest]


def visible_gpus() -> int:
    try:
        import torch

        return torch.cuda.device_count()
    except ImportError:
        return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=None, help="largest GPU count (default: all visible)")
    parser.add_argument("--size", default="250m")
    parser.add_argument("--steps", type=int, default=80)
    parser.add_argument("--timing-warmup", type=int, default=20)
    parser.add_argument("--batch-per-gpu", type=int, default=32)
    parser.add_argument("--pairs", type=int, default=2,
                        help="rounds: each runs the smaller counts once and a trainops/torchrun pair at the largest")
    parser.add_argument("--ddp-bucket-mb", default="",
                        help="other DDP bucket sizes (MB, comma-separated) to run through transform() at the largest "
                             "count")
    parser.add_argument("--no-compile", dest="compile", action="store_false", help="DDP runs without torch.compile")
    parser.add_argument("--sharded", default="fsdp2,tp2,ddp-eager",
                        help="which of fsdp2, tp2, ddp-eager to run after the DDP runs (comma-separated; '' for none)")
    parser.add_argument("--out", default="bench-multi-gpu.json")
    args = parser.parse_args()
    os.environ.update(NVLS_OFF)  # the probes' processes inherit it too
    largest = args.gpus or visible_gpus()
    if largest < 1:
        raise SystemExit("no GPU visible: pass --gpus N (with --size tiny --no-compile for a CPU check)")
    env = environment()
    ddp = {"type": "torch_distributed"}
    result: dict = {"gpus": largest, "size": args.size, "batch_per_gpu": args.batch_per_gpu, "steps": args.steps,
                    "timing_warmup": args.timing_warmup, "compile_ddp": args.compile, "ddp": [], "sharded": []}
    def save(run: dict | None = None) -> None:
        # Progress on the way: a line per run and the JSON so far, so a run cut short still leaves its figures.
        if run is not None:
            print(f"  {run['label']:<22} world {run['world_size']} {run['tokens_per_second']:>12,.0f} tokens/s, "
                  f"peak {run['peak_memory_gib']:.1f} GiB, wall {run['wall_seconds']:.0f} s", flush=True)
        with open(args.out, "w", encoding="utf-8") as handle:
            json.dump(result, handle, indent=1)

    with tempfile.TemporaryDirectory(prefix="bench-multi-") as directory:
        scratch = Path(directory)

        def ddp_parameters(count: int):
            return lambda out: hyperparameters(args, args.batch_per_gpu * count, out)

        def saved(run: dict) -> dict:
            save(run)
            return run

        trainops_runs, torchrun_runs = [], []
        for index in range(args.pairs):
            # The smaller counts between the pairs: a 1-GPU figure from one moment is too noisy a denominator for
            # a 1 % question (it moved 3.7 % between machines), so it is a median over the same rounds as the rest.
            for count in gpu_counts(largest)[:-1]:
                result["ddp"].append(saved(run_trainops(scratch, f"ddp-{count}-{index}", ddp, count,
                                                        ddp_parameters(count), env)))
            pair_a, pair_b = in_turn(
                index,
                lambda round_: saved(run_trainops(scratch, f"ddp-{largest}-{round_}", ddp, largest,
                                                  ddp_parameters(largest), env)),
                lambda round_: saved(run_torchrun(scratch, f"torchrun-{largest}-{round_}", largest,
                                                  ddp_parameters(largest), env)))
            trainops_runs.append(pair_a)
            torchrun_runs.append(pair_b)
        result["ddp"] += trainops_runs
        result["torchrun"] = torchrun_runs
        # The plain-DDP baseline at every count, in the same run (so the same machine state).
        result["plain_ddp"] = [saved(run_plain(scratch, f"plain-ddp-{count}", count, args, env))
                               for count in gpu_counts(largest)]
        result["bucket_variants"] = []
        for megabytes in (int(text) for text in args.ddp_bucket_mb.split(",") if text.strip()):
            if largest < 2:
                break
            parameters_of = lambda out, mb=megabytes: hyperparameters(  # noqa: E731
                args, args.batch_per_gpu * largest, out, ddp_bucket_mb=mb)
            run = run_trainops(scratch, f"ddp-{largest}-bucket{megabytes}", ddp, largest, parameters_of, env)
            run["bucket_mb"] = megabytes
            result["bucket_variants"].append(saved(run))
        # FSDP2 with the DDP runs' compile setting (its target is DDP's tokens/s); TP 2 eager (compiling DTensor
        # tensor-parallel graphs costs more than the timed steps). A sharded mode that fails is recorded, not fatal.
        eager = argparse.Namespace(**{**vars(args), "compile": False})
        sharded = {"fsdp2": ({"type": "smp", "parameters": {"hybrid_shard_degree": largest}}, largest, args),
                   "tp2": ({"type": "smp", "parameters": {"tensor_parallel_degree": 2}}, largest // 2, eager)}
        chosen = set(filter(None, args.sharded.split(",")))
        for label, (distribution, data_parallel, mode) in sharded.items():
            if largest < 2:
                break
            if label not in chosen:
                continue
            parameters_of = (lambda out, dp=data_parallel, mode=mode:  # noqa: E731
                             hyperparameters(mode, args.batch_per_gpu * dp, out))
            try:
                run = run_trainops(scratch, f"{label}-{largest}", distribution, largest, parameters_of, env)
            except RuntimeError as error:
                result.setdefault("failed", {})[label] = str(error)[-3000:]
                print(f"  {label} failed: {str(error)[-600:]}", flush=True)
                continue
            run["mode_label"] = label
            result["sharded"].append(saved(run))
        eager_ddp = lambda out: hyperparameters(eager, args.batch_per_gpu * largest, out)  # noqa: E731
        if largest >= 2 and "ddp-eager" in chosen:
            run = run_trainops(scratch, f"ddp-eager-{largest}", ddp, largest, eager_ddp, env)
            run["mode_label"] = "ddp-eager"
            result["sharded"].append(saved(run))
    one = statistics.median(run["tokens_per_second"] for run in result["ddp"] if run["world_size"] == 1)
    by_count: dict[int, list[float]] = {}
    for run in result["ddp"]:
        by_count.setdefault(run["world_size"], []).append(run["tokens_per_second"])
    result["scaling"] = {str(count): {"tokens_per_second": statistics.median(rates),
                                      "efficiency": statistics.median(rates) / (count * one)}
                         for count, rates in sorted(by_count.items())}
    trainops_rate = statistics.median(run["tokens_per_second"] for run in trainops_runs)
    torchrun_rate = statistics.median(run["tokens_per_second"] for run in torchrun_runs)
    result["ratio"] = trainops_rate / torchrun_rate
    plain = {run["world_size"]: run["tokens_per_second"] for run in result["plain_ddp"]}
    result["plain_scaling"] = {str(count): {"tokens_per_second": rate, "efficiency": rate / (count * one),
                                            "efficiency_vs_plain_1": rate / (count * plain[1]),
                                            "transform_over_plain": result["scaling"][str(count)]["tokens_per_second"]
                                            / rate}
                               for count, rate in sorted(plain.items())}
    ddp_rate = result["scaling"][str(largest)]["tokens_per_second"]
    for run in result["sharded"] + result["bucket_variants"]:
        run["over_ddp"] = run["tokens_per_second"] / ddp_rate
    for run in result["bucket_variants"]:
        run["efficiency"] = run["tokens_per_second"] / (largest * one)
    if visible_gpus() >= 2 and largest >= 2:
        from trainops.runtime.healthcheck import allreduce_busbw

        result["allreduce_trainops_probe"] = allreduce_busbw(largest, PROBE_BYTES)
        try:
            result["allreduce_nccl_direct"] = nccl_busbw(largest, PROBE_BYTES)
        except ImportError as error:
            result["allreduce_nccl_direct"] = {"error": f"CuPy's NCCL bindings are not installed: {error}"}
    save()
    for count, figures in result["scaling"].items():
        print(f"DDP {count} GPU(s): {figures['tokens_per_second']:>12,.0f} tokens/s, "
              f"scaling efficiency {figures['efficiency']:.3f}")
    for count, figures in result["plain_scaling"].items():
        print(f"plain DDP (defaults, no trainops) {count} GPU(s): {figures['tokens_per_second']:>12,.0f} tokens/s, "
              f"scaling efficiency {figures['efficiency']:.3f} against transform()'s 1 GPU "
              f"({figures['efficiency_vs_plain_1']:.3f} against its own); transform() / plain "
              f"{figures['transform_over_plain']:.3f}")
    ones = [round(run["tokens_per_second"]) for run in result["ddp"] if run["world_size"] == 1]
    print(f"1-GPU runs (the denominator is their median): {ones}")
    print(f"DDP {largest}: trainops {trainops_rate:,.0f} vs torchrun {torchrun_rate:,.0f} tokens/s: ratio "
          f"{result['ratio']:.3f} (runs {[round(r['tokens_per_second']) for r in trainops_runs]} / "
          f"{[round(r['tokens_per_second']) for r in torchrun_runs]})")
    for run in result["sharded"]:
        print(f"{run['mode_label']:<10} {largest} GPUs: {run['tokens_per_second']:>12,.0f} tokens/s, peak "
              f"{run['peak_memory_gib']:.1f} GiB per GPU (dp {run['dp_size']}, tp {run.get('tp_size', 1)}, compile "
              f"{run['compile']}); {run['over_ddp']:.3f} of DDP's tokens/s")
    for run in result["bucket_variants"]:
        print(f"DDP {largest}, {run['bucket_mb']} MB buckets: {run['tokens_per_second']:>12,.0f} tokens/s, scaling "
              f"efficiency {run['efficiency']:.3f}; {run['over_ddp']:.3f} of the default buckets' tokens/s")
    for key in ("allreduce_trainops_probe", "allreduce_nccl_direct"):
        if key in result:
            print(f"{key}: {json.dumps(result[key])}")
    print(f"ranks saw {result['ddp'][-1].get('environment')}; wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
