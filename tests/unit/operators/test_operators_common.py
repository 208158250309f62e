"""The shared operator pieces: job names per task instance, error translation, the console link, lineage datasets,
the provider description."""

from __future__ import annotations

import importlib
import json
from importlib.metadata import entry_points
from types import SimpleNamespace

from support.airflow_home import isolate_airflow_home

isolate_airflow_home()

import pytest  # noqa: E402
from airflow.sdk.exceptions import AirflowException, AirflowFailException  # noqa: E402

from trainops.backends.sagemaker.console import training_job_console_url  # noqa: E402
from trainops.errors import JobFailed, Problem, SpecError  # noqa: E402
from trainops.operators.common import airflow_error, check_backend, task_job_name, translated_errors  # noqa: E402
from trainops.operators.lineage import (  # noqa: E402
    LineageMixin,
    channel_dataset,
    dataset_for,
    remember_lineage,
    training_datasets,
)
from trainops.operators.provider import get_provider_info  # noqa: E402
from trainops.spec.names import valid_job_name  # noqa: E402
from trainops.steps.train import load_spec  # noqa: E402


def ctx(dag_id="retrain", task_id="train", run_id="scheduled__2026-01-05T03:00:00+00:00", map_index=-1, try_number=1):
    return {"ti": SimpleNamespace(dag_id=dag_id, task_id=task_id, run_id=run_id, map_index=map_index,
                                  try_number=try_number)}


# --- job names ----------------------------------------------------------------------------------------------------
def test_every_try_of_a_task_instance_gets_the_same_name():
    assert task_job_name(ctx(try_number=1), "digits") == task_job_name(ctx(try_number=7), "digits")


@pytest.mark.parametrize("change", [{"dag_id": "other"}, {"task_id": "train2"}, {"run_id": "manual__x"},
                                    {"map_index": 3}])
def test_anything_else_that_makes_a_task_instance_unique_changes_the_name(change):
    assert task_job_name(ctx(**change), "digits") != task_job_name(ctx(), "digits")


def test_names_are_valid_sagemaker_names_even_from_long_or_odd_bases():
    for base in ("x" * 200, "my_model.v2 (final)", None, "---"):
        name = task_job_name(ctx(task_id="a_very_long_task_id_" * 5), base)
        assert valid_job_name(name), name
        assert len(name) <= 63


# --- errors -------------------------------------------------------------------------------------------------------
def test_bad_input_fails_without_retry_and_keeps_every_problem():
    error = SpecError([Problem("instance_count", "must be >= 1"), Problem("max_run", "must be > 0")], "job spec")
    translated = airflow_error(error)
    assert isinstance(translated, AirflowFailException)
    assert "instance_count: must be >= 1" in str(translated) and "max_run: must be > 0" in str(translated)


def test_a_failed_job_is_a_retryable_airflow_failure():
    translated = airflow_error(JobFailed("training job x ended Failed: OOM"))
    assert isinstance(translated, AirflowException) and not isinstance(translated, AirflowFailException)


def test_translated_errors_leaves_other_exceptions_alone():
    with pytest.raises(KeyError), translated_errors():
        raise KeyError("a bug keeps its traceback")
    with pytest.raises(AirflowFailException, match="backend"):
        check_backend("ecs")


# --- the console link ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("region, domain", [("us-east-1", "console.aws.amazon.com"),
                                            ("cn-north-1", "console.amazonaws.cn"),
                                            ("us-gov-west-1", "console.amazonaws-us-gov.com")])
def test_console_url_per_partition(region, domain):
    assert training_job_console_url("digits-abc", region) == (
        f"https://{domain}/sagemaker/home?region={region}#/jobs/digits-abc")


# --- lineage ------------------------------------------------------------------------------------------------------
def test_dataset_names_follow_the_openlineage_conventions(tmp_path):
    assert dataset_for("s3://bucket/data/train/") == ("s3://bucket", "data/train/")
    assert dataset_for("file:///srv/data") == ("file", "/srv/data")
    assert dataset_for(tmp_path) == ("file", str(tmp_path))
    assert dataset_for("fsx://fs-0123456789abcdef0/bert/train") == ("fsx://fs-0123456789abcdef0", "bert/train")
    assert dataset_for("") is None


def test_training_lineage_has_s3_and_fsx_inputs_and_the_model_output():
    spec = load_spec({
        "name": "bert", "entry_point": "train.py", "instance_type": "ml.trn1.32xlarge", "instance_count": 2,
        "subnets": ["subnet-0a1b2c3d4e5f67890"], "security_group_ids": ["sg-0a1b2c3d4e5f67890"],
        "inputs": {"train": {"file_system_id": "fs-0123456789abcdef0", "directory_path": "/fsx1a2b3c/bert/train"},
                   "validation": "s3://data/bert/validation/"},
    })
    datasets = training_datasets(spec, None, "s3://out/bert-x/output/model.tar.gz")
    assert sorted(datasets["inputs"]) == [("fsx://fs-0123456789abcdef0", "/fsx1a2b3c/bert/train"),
                                          ("s3://data", "bert/validation/")]
    assert datasets["outputs"] == [("s3://out", "bert-x/output/model.tar.gz")]
    local = training_datasets(spec, {"train": "/staged/train"}, None)
    assert ("file", "/staged/train") in local["inputs"] and local["outputs"] == []
    assert channel_dataset(spec.channels["train"])[0] == "fsx://fs-0123456789abcdef0"


def test_lineage_facets_need_the_openlineage_provider():
    holder = LineageMixin()
    assert holder.get_openlineage_facets_on_complete(None) is None  # nothing recorded
    remember_lineage(holder, ["s3://a/b"], ["s3://c/d"])
    try:
        import airflow.providers.openlineage  # noqa: F401
    except ImportError:
        assert holder.get_openlineage_facets_on_complete(None) is None
    else:  # pragma: no cover - only where the provider is installed
        lineage = holder.get_openlineage_facets_on_complete(None)
        assert [d.name for d in lineage.inputs] == ["b"] and [d.name for d in lineage.outputs] == ["d"]


# --- provider -----------------------------------------------------------------------------------------------------
def test_the_provider_info_is_valid_and_every_module_it_names_imports():
    from importlib.resources import files

    import jsonschema

    info = get_provider_info()
    schema = json.loads(files("airflow").joinpath("provider_info.schema.json").read_text())
    jsonschema.validate(info, schema)
    assert info["package-name"] == "trainops"
    modules = [m for group in ("operators", "triggers") for entry in info[group] for m in entry["python-modules"]]
    for module in modules:
        importlib.import_module(module)
    for path in info["extra-links"]:
        module, _, name = path.rpartition(".")
        assert hasattr(importlib.import_module(module), name)
    # Every extra link an operator shows is declared (Airflow 2.11 drops an operator's links when one is not).
    from trainops.operators import evaluate, register, stage, training

    shown = {f"{type(link).__module__}.{type(link).__name__}"
             for operator in (training.DistributedTrainingOperator, evaluate.EvaluateModelOperator,
                              register.RegisterModelOperator, stage.StageDataOperator)
             for link in operator.operator_extra_links}
    assert shown and shown <= set(info["extra-links"]), shown - set(info["extra-links"])


def test_the_entry_point_airflow_reads_is_declared():
    found = [ep for ep in entry_points(group="apache_airflow_provider") if ep.value.startswith("trainops.")]
    assert [ep.value for ep in found] == ["trainops.operators.provider:get_provider_info"]
    assert found[0].load() is get_provider_info


# --- retry defaults -----------------------------------------------------------------------------------------------
def test_operators_retry_twice_a_minute_apart_unless_the_task_or_the_dag_says_otherwise():
    from airflow.sdk import DAG

    from trainops.operators.stage import StageDataOperator
    from trainops.operators.training import DistributedTrainingOperator

    plain = DistributedTrainingOperator(task_id="train", spec={})
    assert (plain.retries, plain.retry_delay.total_seconds()) == (2, 60)
    assert DistributedTrainingOperator(task_id="train", spec={}, retries=0).retries == 0
    with DAG(dag_id="defaults", schedule=None, default_args={"retries": 5}):
        from_dag = StageDataOperator(task_id="stage", source="a", destination="b")
    assert (from_dag.retries, from_dag.retry_delay.total_seconds()) == (5, 60)


def test_the_links_are_the_ones_the_tasks_backend_declares():
    from trainops.backends import get_backend
    from trainops.operators.links import (
        EvaluationJobLink,
        ModelVersionLink,
        TrainingJobLink,
        TrainingLogsLink,
        remember_links,
    )

    class Task:
        pass

    task = Task()
    sagemaker = get_backend("sagemaker", region="us-east-1", client_factory=lambda service: None)
    assert TrainingLogsLink().get_link(task, ti_key=None) == ""  # nothing known yet: no link
    remember_links(task, sagemaker, "training", "digits-1", {"region": "eu-west-1"})
    remember_links(task, sagemaker, "evaluation", "evaluate-1", {})  # the backend's own region
    remember_links(task, sagemaker, "model", "arn:aws:sagemaker:ap-south-1:1:model-package/digits/3")
    logs = TrainingLogsLink().get_link(task, ti_key=None)
    assert logs.startswith("https://console.aws.amazon.com/cloudwatch/home?region=eu-west-1#logsV2:log-groups/")
    assert "$252Faws$252Fsagemaker$252FTrainingJobs" in logs and "digits-1" in logs
    assert TrainingJobLink().get_link(task, ti_key=None).endswith("region=eu-west-1#/jobs/digits-1")
    assert EvaluationJobLink().get_link(task, ti_key=None).endswith("region=us-east-1#/processing-jobs/evaluate-1")
    assert "region=ap-south-1#/model-packages/" in ModelVersionLink().get_link(task, ti_key=None)
    # A backend whose jobs have no page declares none: its links stay empty.
    local = Task()
    remember_links(local, get_backend("local"), "training", "digits-1", {"workdir": "/w"})
    assert TrainingJobLink().get_link(local, ti_key=None) == ""


# --- the connection's clients ---------------------------------------------------------------------------------------
def test_the_lazy_factory_reads_the_connection_once_and_keeps_the_advisory_clients(monkeypatch):
    """The operators' factory (built on first use) hands the preflight the connection's advisory clients (one retry,
    short timeouts): a look that cannot be made (a quota API the endpoint lacks) must cost seconds under Airflow too,
    not the ordinary clients' ten adaptive attempts."""
    import boto3

    from trainops.aws.clients import ADVISORY_SETTINGS, SessionClients, advisory_client, client_config
    from trainops.operators import common

    built = []

    def from_connection(aws_conn_id, region_name):
        built.append((aws_conn_id, region_name))
        return SessionClients(boto3.session.Session(region_name="us-east-1", aws_access_key_id="testing",
                                                    aws_secret_access_key="testing"), client_config()), "us-east-1"

    monkeypatch.setattr(common, "aws_client_factory", from_connection)
    factory = common.lazy_aws_client_factory("aws_default", None)
    assert built == []  # nothing read until a client is wanted
    ordinary = factory("service-quotas")
    advisory = advisory_client(factory, "service-quotas")
    assert built == [("aws_default", None)]
    assert advisory is not ordinary and advisory is advisory_client(factory, "service-quotas")
    assert ordinary.meta.config.retries == {"mode": "adaptive", "total_max_attempts": 11}  # botocore's spelling
    assert advisory.meta.config.retries == ADVISORY_SETTINGS["retries"]  # standard, 2 attempts
    assert advisory.meta.config.read_timeout == ADVISORY_SETTINGS["read_timeout"]
