"""Where data-parallel time goes (issue 18): bench/plain_ddp.py (no trainops) under ``torchrun``, one knob at a time,
each run timed and then profiled for a few steps (bench/profile_summary.py); one table row per configuration.

DDP rows: one GPU without a wrapper (the reference of scaling efficiency), then DDP with default options at 1 and N
GPUs (``--gpus``, default all visible), then at N GPUs ``gradient_as_bucket_view``, bucket sizes, ``static_graph``,
how compile meets DDP (Dynamo's DDPOptimizer on the wrapped model, blocks compiled inside the wrapper, compiled
autograd), and NCCL's CTA count (``NCCL_MAX_CTAS``: how many SMs the all-reduce takes from backward). FSDP2 rows:
``fully_shard`` over the N GPUs with its knobs (reshard after forward, bf16 parameters, explicit prefetch).

    python3 bench/ddp_profile.py --size 250m --out bench-ddp-profile.json --table bench-ddp-profile.md

``--size tiny --no-compile --gpus 2`` runs every row over gloo on a CPU (a check of the script). ``--only "a;b"`` runs
the rows with those labels.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu import NVLS_OFF, environment  # noqa: E402

HERE = Path(__file__).resolve().parent


def configurations(gpus: int, compile_: bool) -> list[tuple[str, int, dict, dict]]:
    """(label, processes, plain_ddp.py options, extra environment), in the order they run."""
    c = {"compile": compile_}
    gbv = {**c, "gradient-as-bucket-view": True}
    # The first FSDP2 rows step with foreach AdamW (the example's choice for DTensors before issue 18); the fused row
    # shows what the change to fused was worth.
    fsdp = {**c, "wrap": "fsdp2", "optimizer": "foreach"}
    # Most telling first: a run cut short by a time limit still answers the main questions.
    rows = [
        ("1 GPU, no wrapper", 1, {**c, "wrap": "none"}, {}),
        ("DDP defaults", gpus, {**c}, {}),
        ("+ gradient_as_bucket_view", gpus, gbv, {}),
        ("+ gbv, bucket 100 MB", gpus, {**gbv, "bucket-cap-mb": 100}, {}),
        ("+ gbv, NCCL_MAX_CTAS=8", gpus, gbv, {"NCCL_MAX_CTAS": "8"}),
    ]
    if compile_:
        rows += [
            ("+ gbv, bucket 100 MB, one graph", gpus, {**gbv, "bucket-cap-mb": 100, "optimize-ddp": False}, {}),
            ("+ gbv, bucket 400 MB", gpus, {**gbv, "bucket-cap-mb": 400}, {}),
        ]
    if compile_:
        rows.append(("+ gbv, blocks compiled inside DDP", gpus,
                     {"gradient-as-bucket-view": True, "compile-blocks": True}, {}))
    rows += [
        ("FSDP2 defaults", gpus, fsdp, {}),
        ("FSDP2 bf16 params", gpus, {**fsdp, "param-dtype": "bf16"}, {}),
        ("FSDP2 bf16, no reshard after fwd", gpus, {**fsdp, "param-dtype": "bf16", "reshard-after-forward": False},
         {}),
        ("+ gbv, static_graph", gpus, {**gbv, "static-graph": True}, {}),
        ("+ gbv, NCCL_MAX_CTAS=2", gpus, gbv, {"NCCL_MAX_CTAS": "2"}),
        ("+ gbv, bucket 200 MB", gpus, {**gbv, "bucket-cap-mb": 200}, {}),
        ("DDP defaults", 1, {**c}, {}),
        ("FSDP2 bf16, prefetch 2", gpus, {**fsdp, "param-dtype": "bf16", "prefetch": 2}, {}),
    ]
    if compile_:
        rows += [
            ("+ gbv, compiled autograd", gpus, {**gbv, "compiled-autograd": True}, {}),
            ("FSDP2 bf16, blocks compiled", gpus, {"wrap": "fsdp2", "param-dtype": "bf16", "compile-blocks": True,
                                                   "optimizer": "foreach"}, {}),
        ]
    rows.append(("FSDP2 bf16, fused AdamW", gpus, {**fsdp, "param-dtype": "bf16", "optimizer": "fused"}, {}))
    return rows


def run(label: str, processes: int, knobs: dict, extra_env: dict, args: argparse.Namespace, scratch: Path) -> dict:
    metrics = scratch / f"run-{time.monotonic_ns()}.json"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(processes),
               str(HERE / "plain_ddp.py"), "--size", args.size, "--steps", str(args.steps), "--timing-warmup",
               str(args.timing_warmup), "--global-batch", str(args.batch_per_gpu * processes),
               "--profile-steps", str(args.profile_steps), "--metrics-out", str(metrics)]
    for key, value in knobs.items():
        command += [f"--{key}", str(value)]
    started = time.perf_counter()
    # Its own process group, so a run past its time is stopped with its ranks (a hung collective must not eat the
    # rest of the table's time, nor leave ranks holding the GPUs).
    process = subprocess.Popen(command, env=environment(extra_env), cwd=str(scratch), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output, _ = process.communicate(timeout=args.run_timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        output += f"\nTimeoutError: stopped after {args.run_timeout} s"
    if process.returncode != 0 or not metrics.exists():
        lines = output.splitlines()
        # torchrun's own summary ends the output; the child's exception line says what went wrong.
        causes = [line for line in lines if "Error" in line and not line.startswith(("  ", "torch.distributed"))]
        tail = "\n".join(lines[-15:] + causes[-1:])
        return {"label": label, "world_size": processes, "error": f"exit {process.returncode}: {tail}"}
    result = json.loads(metrics.read_text(encoding="utf-8"))
    result.update(label=label, wall_seconds=time.perf_counter() - started, extra_env=extra_env)
    return result


def table(rows: list[dict]) -> str:
    reference = next((row["tokens_per_second"] for row in rows if row.get("label") == "1 GPU, no wrapper"
                      and "error" not in row), None)
    lines = ["| configuration | GPUs | tokens/s | scaling eff. | step ms | GPU idle ms | NCCL ms | NCCL exposed ms "
             "| NCCL kernels | host syncs | launches | data ms | optimizer GPU ms | peak GiB |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for row in rows:
        if "error" in row:
            message = row["error"].splitlines()[-1][:100].replace("|", "/")
            lines.append(f"| {row['label']} | {row['world_size']} | failed: {message} | | | | | | | | | | | |")
            continue
        p = row.get("profile") or {}
        efficiency = (row["tokens_per_second"] / (row["world_size"] * reference)) if reference else None

        def f(key, digits=1, p=p):  # this row's profile, bound now
            return f"{p[key]:.{digits}f}" if key in p else ""

        lines.append(f"| {row['label']} | {row['world_size']} | {row['tokens_per_second']:,.0f} | "
                     f"{'' if efficiency is None else f'{efficiency:.3f}'} | {f('step_ms')} | {f('gpu_idle_ms')} | "
                     f"{f('nccl_ms')} | {f('nccl_exposed_ms', 2)} | {f('nccl_kernels', 0)} | {f('host_syncs', 0)} | "
                     f"{f('launches', 0)} | {f('data_ms', 2)} | {f('optimizer_gpu_ms')} | "
                     f"{row['peak_memory_gib']:.1f} |")
    return "\n".join(lines) + "\n"


def visible_gpus() -> int:
    import torch

    return torch.cuda.device_count()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=None)
    parser.add_argument("--size", default="250m")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--timing-warmup", type=int, default=12)
    parser.add_argument("--profile-steps", type=int, default=4)
    parser.add_argument("--batch-per-gpu", type=int, default=32)
    parser.add_argument("--run-timeout", type=float, default=240, help="seconds one row may take")
    parser.add_argument("--no-compile", dest="compile", action="store_false")
    parser.add_argument("--only", default=None, help="labels separated by semicolons (label@N for one GPU count)")
    parser.add_argument("--out", default="bench-ddp-profile.json")
    parser.add_argument("--table", default="bench-ddp-profile.md")
    args = parser.parse_args()
    os.environ.update(NVLS_OFF)
    gpus = args.gpus or visible_gpus()
    if gpus < 1:
        raise SystemExit("no GPU visible: pass --gpus N (with --size tiny --no-compile for a CPU check)")
    wanted = set(args.only.split(";")) if args.only else None
    results: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="bench-ddp-profile-") as directory:
        for label, processes, knobs, extra in configurations(gpus, args.compile):
            if wanted and label not in wanted and f"{label}@{processes}" not in wanted:
                continue
            row = run(label, processes, knobs, extra, args, Path(directory))
            results.append(row)
            shown = row.get("error", "").splitlines()[-1:] or [f"{row['tokens_per_second']:,.0f} tokens/s"]
            print(f"{label:<36} {processes} GPU(s): {shown[0]}", flush=True)
            with open(args.out, "w", encoding="utf-8") as handle:
                json.dump({"gpus": gpus, "size": args.size, "batch_per_gpu": args.batch_per_gpu, "rows": results},
                          handle, indent=1)
            Path(args.table).write_text(table(results), encoding="utf-8")
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
