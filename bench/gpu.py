"""One-GPU benchmark (issue 8): the GPT example (~255 M parameters, bf16 autocast, sequence 1024, torch.compile)
through ``trainops run`` (local backend, one process) against the same script under plain
``torchrun --standalone --nproc_per_node 1``, alternating (ABBA order, so drift of clocks or temperature hits both
alike).

Reports tokens/s, model FLOP/s (6 x non-embedding parameters + attention, per token; examples/gpt/model.py) and
utilisation against a bf16 matmul ceiling measured in the same run, before and after the training runs: the best of
several GEMM shapes (the health check's 8192^3, 16384^3, and the model's own fc1 / fc2 shapes at this batch); also
against the datasheet's dense bf16 peak (the catalog's). Targets: trainops / torchrun >= 0.98, utilisation >= 0.55.

    CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \\
        python bench/gpu.py --out /tmp/bench-gpu.json

``--size tiny --steps 6 --no-compile`` runs the same sequence on a CPU in seconds (a check of the script, not a
benchmark). The helpers here (specs, launches, the ceiling) are shared with bench/multi_gpu.py.
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

REPO = Path(__file__).resolve().parents[1]
GPT = REPO / "examples" / "gpt"

#: NVLink multicast off (the device hosts are shared; see the device notes): set here for every child, and the
#: launcher passes the whole environment on (trainops.runtime.environment.child_environment).
NVLS_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment with NVLink multicast off, the repository importable, no trainops job variables
    (a plain torchrun run must not look like a trainops one), unbuffered output."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("TRAINOPS_", "SM_"))}
    env.update(NVLS_OFF)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def hyperparameters(args: argparse.Namespace, global_batch: int, metrics_out: str, **extra) -> dict:
    """The GPT example's hyperparameters for a benchmark run."""
    values = {"size": args.size, "steps": args.steps, "global_batch": global_batch, "compile": args.compile,
              "timing_warmup": args.timing_warmup, "log_every": 0, "corpus_bytes": 8 * 2**20,
              "metrics_out": metrics_out}
    values.update(extra)
    return values


def write_spec(path: Path, name: str, distribution: dict | None, parameters: dict) -> Path:
    """A local job spec for the GPT example (JSON is YAML)."""
    spec = {"name": name, "framework": "pytorch", "framework_version": "2.3.0", "py_version": "py311",
            "entry_point": "train.py", "source_dir": str(GPT), "instance_type": "local", "instance_count": 1,
            "hyperparameters": parameters, "max_run": 3000}
    if distribution:
        spec["distribution"] = distribution
    path.write_text(json.dumps(spec, indent=1), encoding="utf-8")
    return path


def _read(path: str, what: str, completed: subprocess.CompletedProcess) -> dict:
    if completed.returncode != 0 or not os.path.exists(path):
        tail = "\n".join((completed.stdout or "").splitlines()[-25:])
        raise RuntimeError(f"{what} failed (exit {completed.returncode}):\n{tail}")
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def run_trainops(scratch: Path, label: str, distribution: dict | None, processes: int, parameters_of,
                 env: dict[str, str]) -> dict:
    """``trainops run`` (local backend) of the GPT example; returns its training.json plus the wall time."""
    metrics = scratch / f"{label}.json"
    spec = write_spec(scratch / f"{label}.spec.json", label, distribution, parameters_of(str(metrics)))
    command = [sys.executable, "-m", "trainops.cli", "run", str(spec), "--workdir", str(scratch / "trainops"),
               "--job-name", label, "--processes-per-host", str(processes)]
    started = time.perf_counter()
    completed = subprocess.run(command, env=env, cwd=str(REPO), capture_output=True, text=True, check=False)
    result = _read(str(metrics), f"trainops run {label}", completed)
    result.update(launcher="trainops", label=label, wall_seconds=time.perf_counter() - started)
    return result


def run_torchrun(scratch: Path, label: str, processes: int, parameters_of, env: dict[str, str]) -> dict:
    """The same script under plain ``torchrun --standalone --nproc_per_node N`` (no trainops launcher)."""
    metrics = scratch / f"{label}.json"
    arguments = []
    for key, value in parameters_of(str(metrics)).items():
        arguments += [f"--{key}", str(value)]
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(processes),
               str(GPT / "train.py"), *arguments]
    started = time.perf_counter()
    completed = subprocess.run(command, env=env, cwd=str(scratch), capture_output=True, text=True, check=False)
    result = _read(str(metrics), f"torchrun {label}", completed)
    result.update(launcher="torchrun", label=label, wall_seconds=time.perf_counter() - started)
    return result


_CEILING = """
import json, sys, torch
from trainops.runtime.healthcheck import copy_gbps, matmul_tflops
device = torch.device("cuda", 0)
shapes = {"8192^3 (health check)": (8192, 8192, 8192), "16384^3": (16384, 16384, 16384)}
shapes.update({f"model {name} {m}x{k}x{n}": (m, k, n) for name, (m, k, n) in json.loads(sys.argv[1]).items()})
rates = {name: round(matmul_tflops(device, shape=shape), 1) for name, shape in shapes.items()}
print(json.dumps({"device": torch.cuda.get_device_name(0), "matmul_tflops_by_shape": rates,
                  "matmul_tflops": max(rates.values()), "copy_gbps": round(copy_gbps(device), 1)}))
"""


def ceiling(scratch: Path, env: dict[str, str], tokens_per_step: int = 32768, width: int = 1536) -> dict:
    """The bf16 matmul ceiling of GPU 0, measured now: the best of the health check's 8192^3 product, a 16384^3 one
    and the model's own largest GEMM shapes (tokens x width x 4 width, and back); plus the copy bandwidth."""
    import torch

    if not torch.cuda.is_available():
        return {"gpus": 0}
    model_shapes = {"fc1": (tokens_per_step, width, 4 * width), "fc2": (tokens_per_step, 4 * width, width)}
    completed = subprocess.run([sys.executable, "-c", _CEILING, json.dumps(model_shapes)], env=env, cwd=str(REPO),
                               capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        raise RuntimeError(f"ceiling measurement failed: {completed.stderr[-2000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def _datasheet(gpu_name: str | None) -> float | None:
    """The catalog's dense bf16 figure for the GPU the runs used."""
    from trainops.runtime.healthcheck import catalog_model, expected_figures

    return expected_figures(catalog_model(gpu_name or "")).get("bf16_tflops")


def _step_shape(args: argparse.Namespace) -> tuple[int, int]:
    """Tokens per step (one GPU) and model width, for the ceiling's model-shaped GEMMs."""
    sys.path.insert(0, str(GPT))
    from model import SIZES

    config = SIZES[args.size]
    return args.global_batch * config.seq_len, config.d_model


def in_turn(index: int, first, second) -> tuple[dict, dict]:
    """Round ``index`` of an ABBA sequence: ``first`` then ``second`` in even rounds, the other way in odd ones;
    returns (A's result, B's result). ``first`` and ``second`` take the round's index."""
    if index % 2:
        b_result = second(index)
        return first(index), b_result
    a_result = first(index)
    return a_result, second(index)


def alternate(pairs: int, first, second) -> tuple[list[dict], list[dict]]:
    """``pairs`` runs of each, in ABBA order: A B, B A, A B, ..."""
    rounds = [in_turn(index, first, second) for index in range(pairs)]
    return [a for a, _ in rounds], [b for _, b in rounds]


def summary_line(label: str, runs: list[dict]) -> str:
    rates = [run["tokens_per_second"] for run in runs]
    return (f"{label:<28} tokens/s median {statistics.median(rates):>12,.0f}  runs "
            + ", ".join(f"{rate:,.0f}" for rate in rates))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="250m")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--timing-warmup", type=int, default=15)
    parser.add_argument("--global-batch", type=int, default=32)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--no-compile", dest="compile", action="store_false")
    parser.add_argument("--out", default="bench-gpu.json")
    args = parser.parse_args()
    env = environment()
    with tempfile.TemporaryDirectory(prefix="bench-gpu-") as directory:
        scratch = Path(directory)
        tokens, width = _step_shape(args)
        before = ceiling(scratch, env, tokens, width)
        parameters_of = lambda out: hyperparameters(args, args.global_batch, out)  # noqa: E731
        trainops_runs, torchrun_runs = alternate(
            args.pairs,
            lambda index: run_trainops(scratch, f"gpu-trainops-{index}", None, 1, parameters_of, env),
            lambda index: run_torchrun(scratch, f"gpu-torchrun-{index}", 1, parameters_of, env))
        after = ceiling(scratch, env, tokens, width)
    trainops_rate = statistics.median(run["tokens_per_second"] for run in trainops_runs)
    torchrun_rate = statistics.median(run["tokens_per_second"] for run in torchrun_runs)
    flops = trainops_runs[0]["flops_per_token"]
    ceilings = [figures.get("matmul_tflops") for figures in (before, after) if figures.get("matmul_tflops")]
    ceiling_tflops = statistics.mean(ceilings) if ceilings else None
    result = {
        "size": args.size, "parameters": trainops_runs[0]["parameters"], "seq_len": trainops_runs[0]["seq_len"],
        "global_batch": args.global_batch, "steps": args.steps, "timing_warmup": args.timing_warmup,
        "compile": args.compile, "gpu": trainops_runs[0].get("gpu"), "flops_per_token": flops,
        "ceiling_before": before, "ceiling_after": after, "ceiling_tflops": ceiling_tflops,
        "trainops_tokens_per_second": trainops_rate, "torchrun_tokens_per_second": torchrun_rate,
        "ratio": trainops_rate / torchrun_rate,
        "trainops_model_tflops": trainops_rate * flops / 1e12, "torchrun_model_tflops": torchrun_rate * flops / 1e12,
        "utilisation_trainops": trainops_rate * flops / 1e12 / ceiling_tflops if ceiling_tflops else None,
        "utilisation_torchrun": torchrun_rate * flops / 1e12 / ceiling_tflops if ceiling_tflops else None,
        "datasheet_bf16_tflops": _datasheet(trainops_runs[0].get("gpu")),
        "nvls_environment_seen_by_ranks": trainops_runs[0].get("environment"),
        "runs": trainops_runs + torchrun_runs,
    }
    if result["datasheet_bf16_tflops"]:
        result["mfu_datasheet_trainops"] = result["trainops_model_tflops"] / result["datasheet_bf16_tflops"]
    with open(args.out, "w", encoding="utf-8") as handle:
        json.dump(result, handle, indent=1)
    print(summary_line("trainops run (1 process)", trainops_runs))
    print(summary_line("torchrun --standalone", torchrun_runs))
    print(f"ratio trainops/torchrun {result['ratio']:.3f} (target >= 0.98)")
    if ceiling_tflops:
        print(f"bf16 matmul ceiling {before.get('matmul_tflops')} / {after.get('matmul_tflops')} TFLOP/s "
              f"(before / after); model {result['trainops_model_tflops']:.1f} TFLOP/s trainops, "
              f"{result['torchrun_model_tflops']:.1f} torchrun; utilisation {result['utilisation_trainops']:.3f} "
              f"trainops, {result['utilisation_torchrun']:.3f} torchrun (target >= 0.55)")
    if ceiling_tflops:
        print(f"ceiling by shape (before): {before.get('matmul_tflops_by_shape')}")
    if result.get("mfu_datasheet_trainops"):
        print(f"against the datasheet's {result['datasheet_bf16_tflops']} TFLOP/s: "
              f"{result['mfu_datasheet_trainops']:.3f} (trainops)")
    print(f"ranks saw {result['nvls_environment_seen_by_ranks']}; wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
