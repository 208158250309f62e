"""Where a training step's time goes, from a ``torch.profiler`` chrome trace of a few steps (issue 18): the figures
bench/ddp_profile.py puts in its table, so the raw trace need not be kept.

Per step (the trace's span of ``step`` annotations divided by the step count), in milliseconds:

- ``step_ms``: wall time of a step, from the first step's start to the last GPU or host event;
- ``gpu_busy_ms``: the union of all GPU kernels and copies (so two overlapping streams count once); ``gpu_idle_ms`` is
  the rest of the step: the GPU waiting for the host (launch overhead, syncs, data);
- ``compute_ms``: the union of the kernels that are not NCCL's;
- ``nccl_ms``: the union of NCCL kernels; ``nccl_exposed_ms``: the part of it during which no compute kernel ran,
  i.e. communication the step waits for instead of hiding behind backward;
- ``nccl_kernels``: NCCL kernels a step (one per DDP bucket, or per FSDP2 all-gather / reduce-scatter);
- ``host_syncs``: calls that block the host until the GPU catches up (stream/device/event synchronize, blocking
  memcpy), per step, and ``host_sync_calls`` by name over the whole trace;
- ``data_ms`` and ``optimizer_ms``: host time inside the ``data`` and ``optimizer`` annotations; ``optimizer_gpu_ms``:
  the kernels the optimizer step launched (fused or foreach AdamW, and anything else inside ``optimizer``);
- ``launches``: kernel launches a step (the host's cost per step grows with it, compile lowers it).

Standard library only: it runs wherever the trace is read.
"""

from __future__ import annotations

import json

_SYNC_CALLS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy",
               "cuStreamSynchronize", "cuCtxSynchronize", "cuEventSynchronize")
_LAUNCHES = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx",
             "cudaGraphLaunch")


def _union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[list[float]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(start, end) for start, end in merged]


def _length(intervals: list[tuple[float, float]]) -> float:
    return sum(end - start for start, end in intervals)


def _minus(base: list[tuple[float, float]], cover: list[tuple[float, float]]) -> float:
    """Length of the merged intervals ``base`` not covered by the merged intervals ``cover``."""
    uncovered, index = 0.0, 0
    for start, end in base:
        position = start
        while index < len(cover) and cover[index][1] <= position:
            index += 1
        scan = index
        while scan < len(cover) and cover[scan][0] < end:
            if cover[scan][0] > position:
                uncovered += cover[scan][0] - position
            position = max(position, cover[scan][1])
            scan += 1
        if position < end:
            uncovered += end - position
    return uncovered


def _is_nccl(name: str) -> bool:
    return "nccl" in name.lower()


def summarise_events(events: list[dict], steps: int) -> dict:
    complete = [event for event in events if event.get("ph") == "X" and "dur" in event]
    step_marks = [event for event in complete if event.get("name") == "step" and event.get("cat") == "user_annotation"]
    # The host runs ahead of the GPU, so a step's wall time runs from the first step's start to whatever ends last,
    # host or GPU (the profiled steps start on an idle GPU and end with a synchronize).
    begin = min(e["ts"] for e in (step_marks or complete))
    span = max(e["ts"] + e["dur"] for e in complete) - begin
    if step_marks:
        steps = len(step_marks)
    gpu = [event for event in complete if event.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    kernels = [event for event in gpu if event.get("cat") == "kernel"]
    everything = _union([(e["ts"], e["ts"] + e["dur"]) for e in gpu])
    compute = _union([(e["ts"], e["ts"] + e["dur"]) for e in gpu if not _is_nccl(e["name"])])
    nccl = _union([(e["ts"], e["ts"] + e["dur"]) for e in kernels if _is_nccl(e["name"])])
    host = [event for event in complete if event.get("cat") in ("cuda_runtime", "cuda_driver")]
    annotations = {name: [e for e in complete if e.get("name") == name and e.get("cat") == "user_annotation"]
                   for name in ("data", "optimizer")}
    optimizer_spans = _union([(e["ts"], e["ts"] + e["dur"]) for e in annotations["optimizer"]])
    # Kernels the optimizer launched: their launch call (a correlation id) lies inside an "optimizer" span.
    launched_in_optimizer = {e.get("args", {}).get("correlation") for e in host
                             if e["name"] in _LAUNCHES and any(s <= e["ts"] < t for s, t in optimizer_spans)}
    optimizer_gpu = sum(e["dur"] for e in kernels if e.get("args", {}).get("correlation") in launched_in_optimizer)
    syncs: dict[str, int] = {}
    for event in host:
        if event["name"] in _SYNC_CALLS:
            syncs[event["name"]] = syncs.get(event["name"], 0) + 1
    per = max(steps, 1) * 1000.0  # microseconds in the trace -> milliseconds per step
    nccl_names: dict[str, int] = {}
    for event in kernels:
        if _is_nccl(event["name"]):
            short = event["name"].split("(")[0][:60]
            nccl_names[short] = nccl_names.get(short, 0) + 1
    return {
        "steps": steps,
        "step_ms": span / per,
        "gpu_busy_ms": _length(everything) / per,
        "gpu_idle_ms": (span - _length(everything)) / per,
        "compute_ms": _length(compute) / per,
        "nccl_ms": _length(nccl) / per,
        "nccl_exposed_ms": _minus(nccl, compute) / per,
        "nccl_kernels": sum(1 for e in kernels if _is_nccl(e["name"])) / max(steps, 1),
        "nccl_kernel_names": nccl_names,
        "host_syncs": sum(1 for e in host if e["name"] in _SYNC_CALLS) / max(steps, 1),
        "host_sync_calls": syncs,
        "launches": sum(1 for e in host if e["name"] in _LAUNCHES) / max(steps, 1),
        "data_ms": sum(e["dur"] for e in annotations["data"]) / per,
        "optimizer_ms": sum(e["dur"] for e in annotations["optimizer"]) / per,
        "optimizer_gpu_ms": optimizer_gpu / per,
    }


def summarise_trace(path: str, steps: int) -> dict:
    with open(path, encoding="utf-8") as handle:
        trace = json.load(handle)
    return summarise_events(trace.get("traceEvents", []), steps)
