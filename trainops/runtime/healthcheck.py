"""GPU health check: a few seconds of measurements per host, before training starts, so one slow GPU fails the job
early instead of slowing a whole fleet for hours.

``python -m trainops.runtime healthcheck`` (and, when asked for, the first step of every launch:
``TRAINOPS_HEALTHCHECK=1`` in the job's environment or the hyperparameter ``trainops_healthcheck: true``) measures on
each GPU of this host:

- the bf16 matrix-multiply rate (TFLOP/s, an 8192^3 product repeated),
- the device-memory bandwidth (GB/s, a device-to-device copy of 1 GiB, bytes read plus bytes written),

and with several GPUs the all-reduce bus bandwidth (GB/s, NCCL, one process per GPU; ``busbw = algbw * 2(n-1)/n`` as
nccl-tests reports it). Each figure is compared with what the instance catalog expects of that GPU model
(:mod:`trainops.runtime.catalog`: ``bf16_tflops``, ``memory_bandwidth_gbps``; the model is read from torch's device
name, else from the instance type). A figure below ``threshold`` x expected (default 0.5,
``TRAINOPS_HEALTHCHECK_THRESHOLD`` or ``--threshold``) fails the check with a message naming host, device and
figure. The catalog has no all-reduce figure: it is reported, and checked only against
``TRAINOPS_HEALTHCHECK_MIN_BUSBW_GBPS`` when that is set.

It prints a table and writes the report as JSON (``healthcheck-<host>.json`` in the output data directory). On a host
without a GPU it says so and passes. The launcher runs it as a separate process, so no CUDA context outlives it.

Function-local imports (runtime start): every process of the runtime (the launcher, each rank, a training script's
helpers) imports only what its command runs.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import time
from collections.abc import Mapping
from typing import Any

from trainops.runtime.records import write_atomically
from trainops.runtime.untrusted import read_json, unreadable

DEFAULT_THRESHOLD = 0.5
#: The most a host's health check report may hold (a few checks per device).
REPORT_LIMIT_BYTES = 1024 * 1024
MATMUL_SIZE = 8192
COPY_BYTES = 2**30
ALLREDUCE_BYTES = 256 * 2**20

#: torch's device names -> catalog accelerator models (most specific first).
_MODEL_NAMES = (("H200", "H200"), ("H100", "H100"), ("A100-SXM4-80GB", "A100-80GB"), ("A100 80GB", "A100-80GB"),
                ("A100-PCIE-80GB", "A100-80GB"), ("A100", "A100-40GB"), ("A10G", "A10G"), ("L40S", "L40S"),
                ("L4", "L4"), ("T4", "T4"), ("V100", "V100"), ("B200", "B200"))


def catalog_model(device_name: str, instance_type: str = "") -> str | None:
    """The catalog's accelerator model for a torch device name (``"NVIDIA H200"`` -> ``"H200"``), else the instance
    type's, else None."""
    for marker, model in _MODEL_NAMES:
        if marker in device_name:
            return model
    from trainops.runtime import catalog

    instance = catalog.lookup(instance_type)
    return instance.accelerator_model if instance is not None else None


def expected_figures(model: str | None) -> dict[str, float | None]:
    """``{"bf16_tflops": ..., "memory_bandwidth_gbps": ...}`` the catalog gives an accelerator model (None: unknown)."""
    from trainops.runtime import catalog

    chip = catalog._table()["accelerators"].get(model or "", {})
    return {"bf16_tflops": chip.get("bf16_tflops"), "memory_bandwidth_gbps": chip.get("memory_bandwidth_gbps")}


def _median_seconds(run, repeats: int, device: Any) -> float:
    """Median wall time of ``run()`` over ``repeats`` tries, timed with CUDA events."""
    import torch

    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        torch.cuda.synchronize(device)
        times.append(start.elapsed_time(end) / 1000.0)
    return statistics.median(times)


def matmul_tflops(device: Any, size: int = MATMUL_SIZE, iterations: int = 20, repeats: int = 5,
                  shape: tuple[int, int, int] | None = None) -> float:
    """bf16 matrix-multiply rate of one GPU in TFLOP/s: ``size``^3, or an ``(m, k, n)`` product (random operands:
    zeros run faster than real data)."""
    import torch

    m, k, n = shape or (size, size, size)
    # Events and kernels on the measured GPU's own stream (the current device may be another one).
    with torch.cuda.device(device):
        generator = torch.Generator(device=device).manual_seed(0)
        a = torch.randn(m, k, device=device, dtype=torch.bfloat16, generator=generator)
        b = torch.randn(k, n, device=device, dtype=torch.bfloat16, generator=generator)
        out = torch.empty(m, n, device=device, dtype=torch.bfloat16)

        def run() -> None:
            for _ in range(iterations):
                torch.matmul(a, b, out=out)

        run()  # warm-up: cuBLAS handle, kernel selection
        torch.cuda.synchronize(device)
        seconds = _median_seconds(run, repeats, device)
    return 2.0 * m * k * n * iterations / seconds / 1e12


def copy_gbps(device: Any, nbytes: int = COPY_BYTES, iterations: int = 20, repeats: int = 5) -> float:
    """Device-memory bandwidth of one GPU in GB/s: a device-to-device copy, counting bytes read plus written."""
    import torch

    with torch.cuda.device(device):
        source = torch.randint(0, 255, (nbytes,), dtype=torch.uint8, device=device)
        target = torch.empty_like(source)

        def run() -> None:
            for _ in range(iterations):
                target.copy_(source)

        run()
        torch.cuda.synchronize(device)
        seconds = _median_seconds(run, repeats, device)
    return 2.0 * nbytes * iterations / seconds / 1e9


def _allreduce_worker(rank: int, world: int, port: int, nbytes: int, iterations: int, result_path: str) -> None:
    import datetime

    import torch
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    store = dist.TCPStore("127.0.0.1", port, world, rank == 0, timeout=datetime.timedelta(seconds=120))
    dist.init_process_group("nccl", store=store, rank=rank, world_size=world, device_id=torch.device("cuda", rank))
    try:
        tensor = torch.ones(nbytes // 4, dtype=torch.float32, device="cuda")
        for _ in range(5):
            dist.all_reduce(tensor)
        torch.cuda.synchronize()
        dist.barrier()
        started = time.perf_counter()
        for _ in range(iterations):
            dist.all_reduce(tensor)
        torch.cuda.synchronize()
        elapsed = torch.tensor([time.perf_counter() - started], device="cuda")
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)  # the slowest rank sets the pace
        if rank == 0:
            seconds = elapsed.item() / iterations
            algbw = nbytes / seconds / 1e9
            with open(result_path, "w", encoding="utf-8") as handle:
                json.dump({"bytes": nbytes, "gpus": world, "seconds": seconds, "algbw_gbps": algbw,
                           "busbw_gbps": algbw * 2 * (world - 1) / world}, handle)
    finally:
        dist.destroy_process_group()


def allreduce_busbw(gpus: int, nbytes: int = ALLREDUCE_BYTES, iterations: int = 20) -> dict[str, float]:
    """All-reduce bandwidth over ``gpus`` local GPUs (one spawned process each, NCCL, float32 sum of ``nbytes``):
    ``{"bytes", "gpus", "seconds", "algbw_gbps", "busbw_gbps"}``. The processes inherit this environment (NCCL_*)."""
    import tempfile

    import torch.multiprocessing as multiprocessing

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with tempfile.TemporaryDirectory() as scratch:
        result_path = os.path.join(scratch, "allreduce.json")
        multiprocessing.spawn(_allreduce_worker, args=(gpus, port, nbytes, iterations, result_path), nprocs=gpus,
                              join=True)
        with open(result_path, encoding="utf-8") as handle:  # only this process's workers write in its private scratch
            return json.load(handle)


def _check(host: str, device: str, figure: str, unit: str, measured: float, expected: float | None,
           threshold: float) -> dict[str, Any]:
    ratio = measured / expected if expected else None
    ok = ratio is None or ratio >= threshold
    entry = {"host": host, "device": device, "figure": figure, "unit": unit, "measured": round(measured, 2),
             "expected": expected, "ratio": None if ratio is None else round(ratio, 3), "ok": ok}
    if not ok:
        entry["message"] = (f"health check failed on host {host}: {device} {figure} {measured:.1f} {unit} is "
                            f"{ratio:.2f} of the {expected:g} {unit} expected (threshold {threshold:g})")
    return entry


def run_checks(host: str, threshold: float = DEFAULT_THRESHOLD, instance_type: str = "", all_reduce: bool = True,
               min_busbw_gbps: float | None = None) -> dict[str, Any]:
    """Measure this host's GPUs and compare: the whole report as a dict (``passed``, ``checks``, ``failures``)."""
    import torch

    report: dict[str, Any] = {"host": host, "machine": socket.gethostname(), "threshold": threshold,
                              "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "checks": []}
    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        report.update(gpus=0, passed=True, note="no GPU on this host: nothing to check")
        return report
    count = torch.cuda.device_count()
    report["gpus"] = count
    for index in range(count):
        device = torch.device("cuda", index)
        name = torch.cuda.get_device_name(index)
        model = catalog_model(name, instance_type)
        expected = expected_figures(model)
        label = f"GPU {index} ({name})"
        report["checks"].append(_check(host, label, "bf16 matmul", "TFLOP/s", matmul_tflops(device),
                                       expected["bf16_tflops"], threshold))
        report["checks"].append(_check(host, label, "memory bandwidth", "GB/s", copy_gbps(device),
                                       expected["memory_bandwidth_gbps"], threshold))
        torch.cuda.empty_cache()
    if all_reduce and count > 1:
        probe = allreduce_busbw(count)
        report["all_reduce"] = probe
        report["checks"].append(_check(host, f"{count} GPUs", f"all-reduce busbw ({int(probe['bytes']) >> 20} MiB)",
                                       "GB/s", probe["busbw_gbps"], min_busbw_gbps, 1.0))
    failures = [check["message"] for check in report["checks"] if not check["ok"]]
    report.update(passed=not failures, failures=failures)
    return report


def format_table(report: Mapping[str, Any]) -> str:
    """The report as a fixed-width table (one line per figure) and a verdict line."""
    if not report.get("checks"):
        return f"health check on {report['host']}: {report.get('note', 'no checks')}: passed"
    header = f"{'host':<10} {'device':<26} {'figure':<28} {'measured':>12} {'expected':>10} {'ratio':>6}  ok"
    lines = [header, "-" * len(header)]
    for check in report["checks"]:
        expected = "-" if check["expected"] is None else f"{check['expected']:g}"
        ratio = "-" if check["ratio"] is None else f"{check['ratio']:.2f}"
        lines.append(f"{check['host']:<10} {check['device'][:26]:<26} {check['figure'][:28]:<28} "
                     f"{check['measured']:>8.1f} {check['unit'].split('/')[0]:<3} {expected:>10} {ratio:>6}  "
                     f"{'yes' if check['ok'] else 'NO'}")
    verdict = "passed" if report["passed"] else "FAILED: " + "; ".join(report["failures"])
    lines.append(f"health check on {report['host']}: {verdict}")
    return "\n".join(lines)


def threshold_from(environ: Mapping[str, str], given: float | None = None) -> float:
    """The threshold: ``given``, else ``TRAINOPS_HEALTHCHECK_THRESHOLD``, else 0.5 (a ratio between 0 and 1)."""
    if given is not None:
        value = given
    else:
        text = environ.get("TRAINOPS_HEALTHCHECK_THRESHOLD", "")
        try:
            value = float(text) if text.strip() else DEFAULT_THRESHOLD
        except ValueError:
            raise ValueError(f"TRAINOPS_HEALTHCHECK_THRESHOLD={text!r}: expected a ratio between 0 and 1") from None
    if not 0 < value <= 1:
        raise ValueError(f"health check threshold {value}: expected a ratio between 0 and 1")
    return value


def write_report(report: Mapping[str, Any], output_dir: str) -> str:
    """Write the report as ``healthcheck-<host>.json`` in ``output_dir``; returns the path."""
    os.makedirs(output_dir, exist_ok=True)
    path = os.path.join(output_dir, f"healthcheck-{report['host']}.json")
    # By rename: an earlier run's ranks could have left a link or a FIFO under the name (the output directory).
    write_atomically(path, json.dumps(report, indent=1).encode("utf-8"), 0o644)
    return path


def preflight(plan: Any, environ: Mapping[str, str] | None = None) -> int:
    """The health check as the first step of a launch: run ``python -m trainops.runtime healthcheck`` for this host
    (a separate process: no CUDA context stays in the launcher), with the environment the ranks would get. On failure
    write the failure file (first line: the message naming host, device and figure) and return 1; else 0."""
    import subprocess

    from trainops.runtime.environment import child_environment
    from trainops.runtime.failure import Failure, render_failure, write_once

    environ = os.environ if environ is None else environ
    env = child_environment(environ, plan.env)
    output_dir = env.get("SM_OUTPUT_DATA_DIR") or os.path.dirname(plan.failure_path)
    command = [sys.executable, "-m", "trainops.runtime", "healthcheck", "--host", plan.current_host,
               "--output-dir", output_dir]
    print(f"trainops: health check on host {plan.current_host} before training", file=sys.stderr, flush=True)
    code = subprocess.run(command, env=env, check=False).returncode
    if code == 0:
        return 0
    summary = f"health check on host {plan.current_host} could not run (exit code {code})"
    # The report is in the job's output directory, which an earlier run's ranks could write: read as hostile.
    path = os.path.join(output_dir, f"healthcheck-{plan.current_host}.json")
    try:
        failures = read_json(path, REPORT_LIMIT_BYTES).get("failures") or []
        if isinstance(failures, list) and failures:
            summary = str(failures[0]) + (f" (and {len(failures) - 1} more)" if len(failures) > 1 else "")
    except FileNotFoundError:
        pass  # the check died before it wrote one: the exit code says what there is to say
    except (OSError, ValueError) as error:
        summary += f"; its report is unreadable: {unreadable(error)}"
    try:
        os.remove(plan.failure_path)  # a failure file left by an earlier run of this host (as the launch does)
    except OSError:
        pass
    write_once(plan.failure_path, render_failure(Failure(reason="error", host=plan.current_host, exit_code=code,
                                                         summary=summary, source="launcher")))
    print(f"trainops: {summary}", file=sys.stderr, flush=True)
    return 1


def main(argv: list[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    """``python -m trainops.runtime healthcheck``: exit 0 when every figure passes (or there is no GPU), 1 when one
    does not, 2 on bad arguments."""
    environ = os.environ if environ is None else environ
    parser = build_parser(argparse.ArgumentParser(prog="python -m trainops.runtime healthcheck"))
    arguments = parser.parse_args(argv)
    return run_command(arguments, environ)


def build_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the health check's options to ``parser`` (also used by :mod:`trainops.runtime.cli`)."""
    parser.description = ("Measure this host's GPUs (bf16 matmul rate, memory bandwidth, all-reduce bus bandwidth) "
                          "and compare with what the instance catalog expects. Exit 0 passed (or no GPU), 1 failed.")
    parser.add_argument("--threshold", type=float, default=None,
                        help="fail a figure below this fraction of the expected one "
                             "(default: $TRAINOPS_HEALTHCHECK_THRESHOLD, else 0.5)")
    parser.add_argument("--output-dir", metavar="DIR",
                        help="where healthcheck-<host>.json goes (default: $SM_OUTPUT_DATA_DIR, else none)")
    parser.add_argument("--host", help="host name for the report (default: $SM_CURRENT_HOST, else this machine's)")
    parser.add_argument("--no-all-reduce", action="store_true", help="skip the multi-GPU all-reduce probe")
    return parser


#: Fault injection for drills and tests: a comma-separated list of hosts whose check fails as a slow GPU would, so
#: the path "a failing host ends the attempt as an infrastructure failure, and the retry budget starts another" can be
#: exercised on machines without a GPU. Never set by trainops itself.
INJECT_VARIABLE = "TRAINOPS_HEALTHCHECK_INJECT_FAILURE"


def inject_failure(report: Mapping[str, Any], host: str) -> dict[str, Any]:
    """The report with one failing figure added, worded as a real failure, and marked as injected."""
    check = _check(host, "GPU 0 (injected fault)", "bf16 matmul", "TFLOP/s", 1.0, 100.0, DEFAULT_THRESHOLD)
    check["injected"] = True
    failures = list(report.get("failures") or []) + [check["message"]]
    return {**report, "checks": list(report.get("checks") or []) + [check], "passed": False, "failures": failures,
            "note": f"failure injected by {INJECT_VARIABLE}"}


def run_command(arguments: argparse.Namespace, environ: Mapping[str, str]) -> int:
    """Run the check as the command line asked; prints the table, writes the JSON."""
    try:
        threshold = threshold_from(environ, arguments.threshold)
        floor_text = environ.get("TRAINOPS_HEALTHCHECK_MIN_BUSBW_GBPS", "").strip()
        min_busbw = float(floor_text) if floor_text else None
    except ValueError as error:
        print(f"trainops: {error}", file=sys.stderr)
        return 2
    host = arguments.host or environ.get("SM_CURRENT_HOST") or socket.gethostname()
    report = run_checks(host, threshold, environ.get("SM_CURRENT_INSTANCE_TYPE", ""),
                        all_reduce=not arguments.no_all_reduce, min_busbw_gbps=min_busbw)
    drill = [name.strip() for name in environ.get(INJECT_VARIABLE, "").split(",") if name.strip()]
    if host in drill:
        report = inject_failure(report, host)
    print(format_table(report), flush=True)
    output_dir = arguments.output_dir or environ.get("SM_OUTPUT_DATA_DIR")
    if output_dir:
        print(f"trainops: health check report: {write_report(report, output_dir)}", flush=True)
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
