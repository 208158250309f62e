"""Each engine owns its vocabulary (issue 43, item 2): the neutral modules name no engine, and what an engine declares
(states, failure rules, price, spec rule sets) is what the neutral code consults."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from trainops.backends import failures, states
from trainops.backends.failures import INFRASTRUCTURE, UNKNOWN, Rule
from trainops.backends.states import FAILURE, SUCCESS, WAITING, JobStatus
from trainops.backends.vocabulary import FRONT_END_OPTIONS, Vocabulary, classify_result, register, vocabulary_of
from trainops.errors import SpecError

ENGINE_WORDS = re.compile(r"sagemaker|slurm|\baws\b|fsx|kubernetes|hyperpod", re.IGNORECASE)

#: A Kubernetes-shaped engine's words, registered once for this module.
PODS = register(Vocabulary(
    engine="pods-test",
    tables={"pods_test_job": {"Pending": WAITING, "Running": WAITING, "Succeeded": SUCCESS, "Failed": FAILURE,
                              "NodeLost": FAILURE}},
    training_kind="pods_test_job",
    rules=(Rule(INFRASTRUCTURE, "secondary_status", r"^NodeLost$", "the pod's node was lost", "hosts"),),
))


@pytest.mark.parametrize("module", [states, failures], ids=["states", "failures"])
def test_the_neutral_modules_name_no_engine(module):
    found = ENGINE_WORDS.findall(Path(module.__file__).read_text())
    assert found == [], f"{module.__name__} names {sorted(set(found))}"


def test_a_new_engines_own_rule_classifies_its_lost_node_as_infrastructure():
    result = {"backend": "pods-test", "status": "Failed", "secondary_statuses": ["Pending", "NodeLost"],
              "failure_reason": "the node went away"}
    verdict = classify_result(result)
    assert verdict is not None and verdict.failure_class == INFRASTRUCTURE and verdict.retryable
    assert verdict.evidence == "NodeLost" and verdict.why == "the pod's node was lost"
    # The same evidence from an engine without the rule: today's fallback, unknown (never another engine's rule).
    assert classify_result({**result, "backend": "no-such-engine"}).failure_class == UNKNOWN


def test_a_lost_node_is_retried_on_the_infrastructure_budget():
    from trainops.steps.attempts import run_attempts

    ended = iter([{"backend": "pods-test", "job_name": "job", "status": "Failed",
                   "secondary_statuses": ["NodeLost"]},
                  {"backend": "pods-test", "job_name": "job-2", "status": "Completed"}])
    result = run_attempts(lambda name: next(ended), job_name="job", budgets={"infrastructure": 1},
                          sleep=lambda seconds: None, log=lambda line: None)
    assert result["status"] == "Completed"
    assert [item["failure_class"] for item in result["attempts"]] == [INFRASTRUCTURE, None]
    assert result["attempts"][0]["retried_on"] == INFRASTRUCTURE


def test_an_engines_states_read_as_trainops_status():
    assert PODS.job_status("Running") is JobStatus.IN_PROGRESS
    assert PODS.job_status("Succeeded") is JobStatus.COMPLETED
    assert PODS.job_status("NodeLost") is JobStatus.FAILED
    assert PODS.job_status("Hibernating") is JobStatus.IN_PROGRESS  # unknown: still running, logged once
    assert states.classify("pods_test_job", "Succeeded") == SUCCESS  # registered into the neutral lookup


def test_a_kind_another_engine_holds_and_bad_rules_are_refused():
    with pytest.raises(ValueError, match="registered already"):
        register(Vocabulary(engine="thief", tables={"pods_test_job": {"Done": SUCCESS}}, training_kind="pods_test_job"))
    with pytest.raises(ValueError, match="is not one of"):
        Rule("flaky", "secondary_status", "x", "")
    with pytest.raises(ValueError, match="stage"):
        Rule(INFRASTRUCTURE, "secondary_status", "x", "", "somewhere")
    with pytest.raises(ValueError, match="front-end options"):
        Vocabulary(engine="x", front_end_options=frozenset({"colour"}))


def test_the_built_in_engines_declare_their_words():
    local, sagemaker, slurm = (vocabulary_of(name) for name in ("local", "sagemaker", "slurm"))
    assert sagemaker.priced and local.priced and not slurm.priced
    assert sagemaker.spec_rules == local.spec_rules == {"sagemaker_request"} and slurm.spec_rules == {"slurm"}
    assert set(local.front_end_options) == set(slurm.front_end_options) == set(FRONT_END_OPTIONS)
    assert slurm.takes({"processes_per_host": 2, "channel_overrides": None, "checkpoint_key": "k"}) == {
        "processes_per_host": 2, "checkpoint_key": "k"}
    assert sagemaker.takes({"processes_per_host": 2}) == {}
    assert vocabulary_of("no-such-engine").rules == () and not vocabulary_of("no-such-engine").priced


# --- price ---------------------------------------------------------------------------------------------------------
def _spec(**fields):
    from trainops.spec.loader import parse_job_spec

    return parse_job_spec({"entry_point": "train.py", "instance_type": "ml.g5.12xlarge", **fields},
                          rule_sets=frozenset({"slurm"}))


def test_an_engine_with_no_price_reports_cost_unknown_never_sagemakers():
    from trainops.steps.attempts import attempt_cost, cost_line, total_cost
    from trainops.steps.forecast import forecast

    spec = _spec(instance_count=2)
    planned = forecast(spec, backend="slurm")
    assert planned.attempt_usd is None and planned.hourly_usd is None
    assert planned.lines()[0] == "forecast: unknown (the slurm backend has no price list: its cost is unknown)"
    assert forecast(spec, backend="sagemaker").attempt_usd > 0  # the same spec, priced where SageMaker runs it
    cost = attempt_cost({"backend": "slurm", "duration_seconds": 3600}, instance_type="ml.g5.12xlarge",
                        instance_count=2)
    assert cost["cost"] is None and cost["no_price"]
    assert cost_line(total_cost([cost])) == ("cost unknown over 1 attempt (the slurm backend has no price list: its "
                                             "cost is unknown)")
    local = attempt_cost({"backend": "local", "duration_seconds": 3600}, instance_type="ml.g5.12xlarge")
    assert local["cost"] and "no_price" not in local  # local: what the same request would cost on SageMaker


@pytest.mark.parametrize("budget", ["stop", "refuse"])
def test_max_cost_usd_on_an_engine_with_no_price_is_refused(budget):
    from trainops.steps.forecast import check_budget

    with pytest.raises(SpecError, match="max_cost_usd") as caught:
        check_budget(_spec(max_cost_usd=5, budget=budget), backend="slurm")
    assert "the slurm backend has no price list" in str(caught.value)
    assert check_budget(_spec(max_cost_usd=5000, budget=budget), backend="sagemaker").attempt_usd > 0


def test_guards_get_the_engines_price():
    from trainops.steps.attempts import guards_for

    assert guards_for(_spec(), backend="slurm").hourly_usd is None
    assert guards_for(_spec(), backend="sagemaker").hourly_usd > 0


# --- spec rules ----------------------------------------------------------------------------------------------------
TORCHRUN_ON_CPU = {"entry_point": "train.py", "instance_type": "cpu", "instance_count": 2,
                   "distribution": {"type": "torch_distributed", "processes_per_host": 2}}


def test_slurm_takes_a_cpu_partition_with_torchrun_and_nodes_described_without_ml():
    from trainops.spec.loader import parse_job_spec

    spec = parse_job_spec(TORCHRUN_ON_CPU, rule_sets=vocabulary_of("slurm").spec_rules)
    assert spec.instance_type == "cpu" and spec.dist.type == "torch_distributed"
    on_cpu_type = {**TORCHRUN_ON_CPU, "instance_type": "ml.m5.large"}
    assert parse_job_spec(on_cpu_type, rule_sets=vocabulary_of("slurm").spec_rules).instance_type == "ml.m5.large"
    with pytest.raises(SpecError, match="does not describe Slurm nodes"):
        parse_job_spec({**TORCHRUN_ON_CPU, "instance_type": "cpu; rm -rf"}, rule_sets=vocabulary_of("slurm").spec_rules)


@pytest.mark.parametrize("backend", [None, "local", "sagemaker"])
def test_sagemaker_and_local_still_refuse_what_they_refused(backend):
    from trainops.spec.loader import parse_job_spec

    rule_sets = None if backend is None else vocabulary_of(backend).spec_rules
    with pytest.raises(SpecError, match="is not an instance type"):
        parse_job_spec(TORCHRUN_ON_CPU, rule_sets=rule_sets)
    with pytest.raises(SpecError, match="torch_distributed needs GPU or Trainium instances"):
        parse_job_spec({**TORCHRUN_ON_CPU, "instance_type": "ml.m5.large"}, rule_sets=rule_sets)


def test_a_spec_parsed_for_slurm_meets_the_sagemaker_requests_rules_when_it_goes_there():
    from trainops.spec.loader import parse_job_spec
    from trainops.steps.train import load_spec

    spec = parse_job_spec({**TORCHRUN_ON_CPU, "instance_type": "ml.m5.large"}, rule_sets=frozenset({"slurm"}))
    with pytest.raises(SpecError, match="torch_distributed needs GPU or Trainium instances"):
        load_spec(spec, backend="sagemaker")
    assert load_spec(spec, backend="slurm") is not None


# --- channels ------------------------------------------------------------------------------------------------------
def test_a_channel_uri_is_fingerprinted_as_text_and_a_local_path_by_its_files(tmp_path):
    from trainops.steps.identity import channel_fingerprint

    claim = channel_fingerprint({"train": "pvc://team/data/train"})
    assert claim == channel_fingerprint({"train": "pvc://team/data/train"})
    assert claim != channel_fingerprint({"train": "pvc://team/data/other"})
    assert channel_fingerprint({"train": "s3://bucket/train"}) != claim
    (tmp_path / "a.txt").write_text("1")
    before = channel_fingerprint({"train": str(tmp_path)})
    assert before == channel_fingerprint({"train": f"file://{tmp_path}"})
    (tmp_path / "b.txt").write_text("2")
    assert channel_fingerprint({"train": str(tmp_path)}) != before


def test_submit_binds_the_engines_spec_rules_to_a_spec_parsed_for_another(tmp_path):
    from trainops.backends import get_backend
    from trainops.spec.loader import parse_job_spec

    (tmp_path / "train.py").write_text("print('never runs')\n")
    spec = parse_job_spec({**TORCHRUN_ON_CPU, "instance_type": "ml.m5.large", "source_dir": str(tmp_path)},
                          rule_sets=frozenset({"slurm"}))
    local = get_backend("local", workdir=str(tmp_path / "state"))
    with pytest.raises(SpecError, match="torch_distributed needs GPU or Trainium instances"):
        local.submit(spec, "bound-1", log=lambda line: None)
    assert not (tmp_path / "state" / "jobs" / "bound-1").exists()  # refused before anything was created


def test_a_backend_without_a_vocabulary_takes_the_front_end_options_its_options_have():
    from dataclasses import dataclass
    from typing import ClassVar

    from trainops.backends.api import Backend
    from trainops.backends.options import BackendOptions

    @dataclass(frozen=True)
    class KeyedOptions(BackendOptions):
        backend: ClassVar[str] = "keyed"
        checkpoint_key: str | None = None

    class Keyed(Backend):  # only what vocabulary_of reads
        name = "keyed"
        Options = KeyedOptions

    words = vocabulary_of(Keyed)
    assert words.takes({"checkpoint_key": "k", "processes_per_host": 2}) == {"checkpoint_key": "k"}
    assert not words.priced and words.rules == () and words.spec_rules == frozenset()

    class Claims(Keyed):
        vocabulary = Vocabulary(engine="keyed-claims", front_end_options=frozenset({"channel_overrides"}))

    with pytest.raises(ValueError, match="has no field for"):
        vocabulary_of(Claims)


def test_render_for_slurm_takes_a_cpu_node_description_and_forecasts_no_price(tmp_path, capsys):
    from trainops.cli import main

    (tmp_path / "train.py").write_text("print('hi')\n")
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"entry_point: train.py\nsource_dir: {tmp_path}\ninstance_type: cpu\ninstance_count: 2\n"
                    "distribution: {type: torch_distributed, processes_per_host: 2}\n")
    code = main(["render", str(spec), "--backend", "slurm", "-o", f"shared_dir={tmp_path / 'shared'}",
                 "--job-name", "cpu-1"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "--nodes=2" in captured.out or "nodes" in captured.out
    assert "forecast: unknown (the slurm backend has no price list" in captured.err
    assert main(["render", str(spec), "--job-name", "cpu-1"]) == 2  # the default backend (local): refused
    assert "is not an instance type" in capsys.readouterr().err
