"""bench/profile_summary.py: the figures of the issue-18 profile table, from hand-made trace events whose answer is
known (overlapping streams counted once, NCCL time hidden behind compute or not, syncs, optimizer kernels)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

from profile_summary import summarise_events, summarise_trace  # noqa: E402


def kernel(name: str, start: float, duration: float, correlation: int = 0, stream: int = 7) -> dict:
    return {"ph": "X", "cat": "kernel", "name": name, "ts": start, "dur": duration,
            "args": {"stream": stream, "correlation": correlation}}


def host(name: str, start: float, duration: float = 1.0, correlation: int = 0, cat: str = "cuda_runtime") -> dict:
    return {"ph": "X", "cat": cat, "name": name, "ts": start, "dur": duration, "args": {"correlation": correlation}}


def annotation(name: str, start: float, duration: float) -> dict:
    return {"ph": "X", "cat": "user_annotation", "name": name, "ts": start, "dur": duration}


def two_steps() -> list[dict]:
    """Two steps of 10 ms each (times in microseconds, as torch's chrome trace has them)."""
    events = []
    for step, origin in enumerate((0.0, 10_000.0)):
        events += [
            annotation("step", origin, 10_000),
            annotation("data", origin, 500),
            # compute 1000-7000; NCCL 5000-8000 on another stream: 2000 hidden, 1000 exposed
            kernel("ampere_sgemm", origin + 1_000, 4_000),
            kernel("triton_fused", origin + 4_000, 3_000),
            kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)", origin + 5_000, 3_000, stream=20),
            annotation("optimizer", origin + 8_000, 1_500),
            host("cudaLaunchKernel", origin + 8_100, correlation=100 + step),
            kernel("fused_adamw_kernel", origin + 8_200, 1_000, correlation=100 + step),
            host("cudaStreamSynchronize", origin + 9_600),
        ]
    return events


def test_a_known_trace_gives_the_known_figures():
    summary = summarise_events(two_steps(), steps=99)  # the step annotations decide the count, not the argument
    assert summary["steps"] == 2
    assert summary["step_ms"] == pytest.approx(10.0)
    assert summary["compute_ms"] == pytest.approx(6.0 + 1.0)  # 1000-7000 and the optimizer's 1000
    assert summary["nccl_ms"] == pytest.approx(3.0)
    assert summary["nccl_exposed_ms"] == pytest.approx(1.0)
    assert summary["gpu_busy_ms"] == pytest.approx(7.0 + 1.0)  # 1000-8000 once, plus the optimizer
    assert summary["gpu_idle_ms"] == pytest.approx(2.0)
    assert summary["nccl_kernels"] == 1
    assert summary["host_syncs"] == 1
    assert summary["host_sync_calls"] == {"cudaStreamSynchronize": 2}
    assert summary["launches"] == 1
    assert summary["data_ms"] == pytest.approx(0.5)
    assert summary["optimizer_ms"] == pytest.approx(1.5)
    assert summary["optimizer_gpu_ms"] == pytest.approx(1.0)
    assert summary["nccl_kernel_names"] == {"ncclDevKernel_AllReduce_Sum_f32_RING_LL": 2}


def test_the_step_lasts_until_the_gpu_finishes():
    """The host annotation ends early (the host queues work ahead); the step's wall time ends with the last kernel."""
    events = [annotation("step", 0, 300), kernel("gemm", 100, 1_900)]
    summary = summarise_events(events, steps=1)
    assert summary["step_ms"] == pytest.approx(2.0)
    assert summary["gpu_idle_ms"] == pytest.approx(0.1)


def test_nccl_fully_under_compute_is_not_exposed():
    events = [annotation("step", 0, 1_000), kernel("gemm", 0, 1_000),
              kernel("ncclKernel_AllReduce", 100, 300, stream=3), kernel("ncclKernel_AllReduce", 600, 200, stream=3)]
    summary = summarise_events(events, steps=1)
    assert summary["nccl_ms"] == pytest.approx(0.5)
    assert summary["nccl_exposed_ms"] == 0.0


def test_nccl_with_gaps_in_compute_counts_only_the_gaps():
    events = [annotation("step", 0, 1_000), kernel("gemm", 0, 200), kernel("gemm", 400, 100), kernel("gemm", 700, 50),
              kernel("ncclKernel_AllReduce", 100, 800, stream=3)]
    # NCCL 100-900; compute covers 100-200, 400-500, 700-750: exposed 200-400, 500-700, 750-900 = 550 us
    assert summarise_events(events, steps=1)["nccl_exposed_ms"] == pytest.approx(0.55)


def test_a_trace_file_is_read(tmp_path):
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": two_steps()}), encoding="utf-8")
    assert summarise_trace(str(path), 2)["nccl_exposed_ms"] == pytest.approx(1.0)
