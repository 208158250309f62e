"""A hung local job stopped by the stall watchdog, and a local job stopped at its budget (issue 25 items 4-5): real
emulated hosts, real log pumps, the guard thread beside the job (trainops.backends.local.guarding).

The stand-ins are tests/system/scripts/guards/: `print_then_sleep.py` prints once and hangs (a rank stuck in a
collective), `busy_printer.py` prints every half second for minutes (never stalls, so only the budget ends it). The
local cost is wall time x instances x the catalog price: 1 x ml.m5.large at $0.115/h makes $0.0001 about 3 s."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainops.errors import JobFailed
from trainops.steps.train import train

pytestmark = pytest.mark.system

SCRIPTS = Path(__file__).resolve().parent / "scripts" / "guards"


def spec(tmp_path: Path, entry_point: str, **fields) -> dict:
    return {"name": "guarded", "entry_point": entry_point, "source_dir": str(SCRIPTS), "instance_type": "ml.m5.large",
            "instance_count": 1, "output_path": str(tmp_path / "out"), "max_run": 600, **fields}


def test_a_job_that_prints_once_then_hangs_is_stopped_as_stalled(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINOPS_HOME", str(tmp_path / "home"))
    lines: list[str] = []
    with pytest.raises(JobFailed) as raised:
        train(spec(tmp_path, "print_then_sleep.py", stall_timeout=3), job_name="hung-1", log=lines.append)
    result = raised.value.result
    assert result["status"] == "Stopped" and result["failure_class"] == "infrastructure"
    assert result["failure_evidence"]["reason"] == "stalled"
    assert result["guard"]["kind"] == "stalled" and "stall_timeout 3 s" in result["failure_reason"]
    assert any("step 1 done" in line for line in lines)  # it did print, once
    assert not any("never reached" in line for line in lines)
    assert result["duration_seconds"] < 60  # stopped after seconds, not at max_run (600 s)


def test_a_stalled_attempt_is_retried_on_the_infrastructure_budget(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINOPS_HOME", str(tmp_path / "home"))
    with pytest.raises(JobFailed) as raised:
        train(spec(tmp_path, "print_then_sleep.py", stall_timeout=2), job_name="hung-1",
              retries={"infrastructure": 1, "backoff_seconds": 0}, log=lambda line: None)
    result = raised.value.result
    first, second = result["attempts"]
    assert first["failure_class"] == "infrastructure" and first["retried_on"] == "infrastructure"
    assert second["job_name"] == "hung-1-2" and second["failure_class"] == "infrastructure"


def test_max_cost_usd_stops_a_local_job_and_starts_no_retry(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINOPS_HOME", str(tmp_path / "home"))
    lines: list[str] = []
    with pytest.raises(JobFailed) as raised:
        train(spec(tmp_path, "busy_printer.py", max_cost_usd=0.0001), job_name="pricey-1",
              retries={"infrastructure": 3, "backoff_seconds": 0}, log=lines.append)
    result = raised.value.result
    assert result["status"] == "Stopped" and result["failure_class"] == "budget"
    assert result["guard"]["kind"] == "budget" and "max_cost_usd" in result["failure_reason"]
    assert len(result["attempts"]) == 1  # a spent budget is never retried
    cost = result["cost"]
    assert cost["budget"] == {"max_cost_usd": 0.0001, "mode": "stop", "left": pytest.approx(0.0001 - cost["spent"])}
    assert cost["spent"] >= 0.0001 and cost["forecast"]["hourly_usd"] == pytest.approx(0.115)
    assert result["duration_seconds"] < 60  # about 3 s of wall time at $0.115/h


def test_a_detached_job_followed_by_a_guarded_wait_is_stopped_through_its_stop_request(tmp_path, monkeypatch):
    from trainops.backends.api import get_backend
    from trainops.backends.guards import JobGuards

    home = tmp_path / "home"
    monkeypatch.setenv("TRAINOPS_HOME", str(home))
    train(spec(tmp_path, "print_then_sleep.py"), job_name="detached-1", wait=False, log=lambda line: None)
    backend = get_backend("local")
    result = backend.wait(backend.handle("detached-1"), log=lambda line: None, guards=JobGuards(stall_timeout=3))
    assert result.status.value == "Stopped" and result.details["guard"]["kind"] == "stalled"
    assert result.failure_reason.startswith("stalled: no new log line or metric")
