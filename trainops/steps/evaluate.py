"""The evaluate step: score a trained model with the user's evaluation script, then apply the quality gate.

One call for every caller (Airflow's EvaluateModelOperator, the KFP evaluate component, pipelines, the CLI):
`evaluate` runs the script under the evaluation contract (docs/contracts.md section 6) on the chosen backend, reads
the ``metrics.json`` it wrote, checks the gates (against the current champion when a gate says so) and returns an
`EvaluationResult` whose `to_dict` is small JSON, fit for an XCom value or a KFP output.

A failed gate is a result, not an exception: callers decide whether it fails the task, short-circuits what follows,
or registers the model as Rejected. `EvaluationResult.raise_for_gate` raises `GateFailed` for those that want one.

Heavy modules (boto3, the backends) are imported inside functions, so a DAG file may import this module.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from trainops.errors import Problem, SpecError
from trainops.steps.gate import (
    GateFailed, GateResult, all_passed, check_gates, deciding_result, needs_champion, parse_gates, summary,
)

BACKENDS = ("local", "sagemaker")
REPORT_SUFFIXES = (".html", ".htm", ".md")
PLOT_SUFFIXES = (".png", ".svg", ".jpg", ".jpeg")
#: At most this many file names go into `EvaluationResult.to_dict` (XCom values must stay small).
MAX_LISTED_FILES = 50
#: The name the bootstrap has in the code prefix of a SageMaker evaluation.
BOOTSTRAP_NAME = "trainops_evaluate_bootstrap.py"


class _NotGiven:
    """The default of ``champion``: tells "not given" (look it up) from an explicit None (there is no champion)."""

    def __repr__(self) -> str:
        return "NOT_GIVEN"


NOT_GIVEN: Any = _NotGiven()


@dataclass(frozen=True)
class EvaluationResult:
    """What an evaluation produced and whether the model passed its gates.

    Attributes:
        backend: ``local`` or ``sagemaker``.
        metrics: the contents of ``metrics.json``.
        passed: whether every gate passed (True when there is no gate).
        gates: one result per gate, in the order given.
        output_dir: the evaluation directory (local path, or the S3 prefix on SageMaker).
        metrics_path: the ``metrics.json`` file (path or S3 URI).
        files: other files the script wrote (relative to ``output_dir``; local backend only).
        report: the report the script wrote (first ``.html`` / ``.md`` file), if any.
        plots: images the script wrote (loss curve, confusion matrix...).
        champion_version: the registry version the champion gates compared with, if any.
        job_name: the processing job (SageMaker backend).
        duration_seconds: how long the script ran (local backend).
    """

    backend: str
    metrics: dict[str, float]
    passed: bool
    gates: list[GateResult] = field(default_factory=list)
    output_dir: str = ""
    metrics_path: str = ""
    files: list[str] = field(default_factory=list)
    report: str | None = None
    plots: list[str] = field(default_factory=list)
    champion_version: int | str | None = None
    job_name: str | None = None
    duration_seconds: float | None = None

    @property
    def gate(self) -> GateResult | None:
        """The result that decides: the first failed gate, else the last gate, else None (no gate)."""
        return deciding_result(self.gates)

    @property
    def message(self) -> str:
        """The gates' messages, failures first, one per line ("no gate" when there is none)."""
        return summary(self.gates)

    def raise_for_gate(self) -> None:
        """Raise `GateFailed` (exit code 1) with every failed gate's message when the model did not pass."""
        if not self.passed:
            raise GateFailed(self.message)

    def to_dict(self) -> dict[str, Any]:
        """Small JSON for an XCom value or a KFP output (the file list is cut to `MAX_LISTED_FILES`)."""
        deciding = self.gate
        return {
            "backend": self.backend,
            "passed": self.passed,
            "metrics": dict(self.metrics),
            "gate": deciding.to_dict() if deciding else None,
            "gates": [result.to_dict() for result in self.gates],
            "message": self.message,
            "output_dir": self.output_dir,
            "metrics_path": self.metrics_path,
            "files": self.files[:MAX_LISTED_FILES],
            "report": self.report,
            "plots": self.plots[:MAX_LISTED_FILES],
            "champion_version": self.champion_version,
            "job_name": self.job_name,
            "duration_seconds": self.duration_seconds,
        }


def _check_backend(backend: str) -> str:
    if backend not in BACKENDS:
        raise SpecError(Problem("backend", f"{backend!r} is not a backend; use one of {', '.join(BACKENDS)}"),
                        source="evaluation")
    return backend


def _champion_metrics(
    gates_need_champion: bool,
    champion: Any,
    champion_group: str | None,
    backend: str,
    registry_dir: str | os.PathLike[str] | None,
    client_factory: Callable[[str], Any] | None,
    region: str | None,
) -> tuple[Mapping[str, Any] | None, int | str | None]:
    """The champion's metrics and version for champion gates: given directly (None: there is none yet), or looked up
    in the group's registry."""
    if not gates_need_champion:
        return None, None
    if champion is not NOT_GIVEN:
        return champion, None
    if champion_group is None:
        raise SpecError(Problem("champion_group", "a gate compares with the champion: name the registry group to look "
                                                  "it up in, or pass the champion's metrics as champion (None when "
                                                  "there is no champion yet)"),
                        source="evaluation")
    from trainops.steps.register import find_champion

    found = find_champion(champion_group, backend=backend, registry_dir=registry_dir, client_factory=client_factory,
                          region=region)
    if found is None:
        return None, None
    return found["metrics"], found.get("version")


def evaluate(
    *,
    entry_point: str,
    source_dir: str | os.PathLike[str] | None,
    model_artifact: str | os.PathLike[str],
    channels: Mapping[str, str | os.PathLike[str]],
    output_dir: str | os.PathLike[str],
    gate: Any = None,
    backend: str = "local",
    hyperparameters: Mapping[str, Any] | None = None,
    environment: Mapping[str, str] | None = None,
    timeout: float | None = None,
    champion: Mapping[str, Any] | None = NOT_GIVEN,
    champion_group: str | None = None,
    registry_dir: str | os.PathLike[str] | None = None,
    sink: Callable[[str, bool], None] | None = None,
    role: str | None = None,
    image_uri: str | None = None,
    instance_type: str = "ml.m5.xlarge",
    job_name: str | None = None,
    code_uri: str | None = None,
    client_factory: Callable[[str], Any] | None = None,
    region: str | None = None,
) -> EvaluationResult:
    """Evaluate a model and check its gates.

    Args:
        entry_point: the evaluation script, relative to ``source_dir``.
        source_dir: the directory holding the script (uploaded on SageMaker).
        model_artifact: the training job's ``model.tar.gz``: a local path or ``file://`` URI (local; a model
            directory works too), an ``s3://`` URI (SageMaker).
        channels: data by channel name, e.g. ``{"test": "data/test"}``; the script reads ``SM_CHANNEL_TEST``. On
            SageMaker: exactly one channel, an S3 prefix.
        output_dir: where ``metrics.json`` and the script's other files go (an S3 prefix on SageMaker).
        gate: None, a gate (``"accuracy >= 0.95"``, a mapping) or a list of gates; see `trainops.steps.gate`.
        backend: ``local`` (default) or ``sagemaker``.
        hyperparameters: passed to the script as ``--key value``.
        environment: extra environment variables for the script.
        timeout: seconds the script may run (local: then its process group is stopped; SageMaker: the job's
            MaxRuntimeInSeconds, default one hour).
        champion: the champion's metrics, for gates such as ``accuracy > champion``; None says there is no champion
            yet (champion gates then pass, saying so).
        champion_group: the registry group to look the champion up in, when ``champion`` is not given.
        registry_dir: the local registry (default ``$TRAINOPS_HOME/registry``).
        sink: receives each output line of a local run (default: printed).
        role, image_uri, instance_type, job_name, code_uri, client_factory, region: SageMaker only; see
            `evaluate_on_sagemaker`.

    Raises:
        SpecError: bad input (exit code 2), naming the field.
        JobFailed: the script failed, timed out, or wrote no usable metrics (exit code 1).
    """
    _check_backend(backend)
    gates = parse_gates(gate)
    # Resolve the champion before the (possibly long) evaluation, so a missing group fails fast.
    champion_metrics, champion_version = _champion_metrics(
        needs_champion(gates), champion, champion_group, backend, registry_dir, client_factory, region)
    if backend == "local":
        result = _evaluate_locally(entry_point=entry_point, source_dir=source_dir, model_artifact=model_artifact,
                                   channels=channels, output_dir=output_dir, hyperparameters=hyperparameters,
                                   environment=environment, timeout=timeout, sink=sink)
    else:
        result = evaluate_on_sagemaker(entry_point=entry_point, source_dir=source_dir, model_artifact=model_artifact,
                                       channels=channels, output_dir=output_dir, hyperparameters=hyperparameters,
                                       environment=environment, timeout=timeout, role=role, image_uri=image_uri,
                                       instance_type=instance_type, job_name=job_name, code_uri=code_uri,
                                       client_factory=client_factory, region=region)
    label = f"champion version {champion_version}" if champion_version is not None else "the champion"
    results = check_gates(gates, result.metrics, champion_metrics, label)
    return EvaluationResult(
        backend=result.backend, metrics=result.metrics, passed=all_passed(results), gates=results,
        output_dir=result.output_dir, metrics_path=result.metrics_path, files=result.files, report=result.report,
        plots=result.plots, champion_version=champion_version, job_name=result.job_name,
        duration_seconds=result.duration_seconds,
    )


def _evaluate_locally(**arguments: Any) -> EvaluationResult:
    from trainops.backends.local.evaluate import run_evaluation

    run = run_evaluation(**arguments)
    output = Path(run.output_dir)
    reports = [name for name in run.files if name.lower().endswith(REPORT_SUFFIXES)]
    # A file called report.* wins over other documents the script may have written.
    reports.sort(key=lambda name: (not Path(name).stem.lower().startswith("report"), name))
    plots = [str(output / name) for name in run.files if name.lower().endswith(PLOT_SUFFIXES)]
    return EvaluationResult(
        backend="local", metrics=run.metrics, passed=True, output_dir=run.output_dir, metrics_path=run.metrics_path,
        files=run.files, report=str(output / reports[0]) if reports else None, plots=plots,
        duration_seconds=run.duration_seconds,
    )


# The script the SageMaker processing job starts. The processing backend hands the model over as an unextracted
# model.tar.gz and passes --model-dir/--test-dir/--output-dir; this bridge turns that into the evaluation contract
# (extracted model, SM_CHANNEL_*, SM_OUTPUT_DATA_DIR, TRAINOPS_EVALUATION_DIR, hyperparameters as --key value), so the
# user's script is the same file locally and on SageMaker. Standard library only: it runs in any image.
BOOTSTRAP_SOURCE = '''\
"""trainops evaluation bootstrap: sets up the evaluation contract, then runs the user's script."""
import json
import os
import runpy
import sys
import tarfile

DIRECTORY_OPTIONS = ("--model-dir", "--test-dir", "--output-dir")


def extract(archive, destination):
    os.makedirs(destination, exist_ok=True)
    root = os.path.realpath(destination)
    with tarfile.open(archive, "r:*") as bundle:
        members = bundle.getmembers()
        for member in members:
            target = os.path.realpath(os.path.join(root, member.name))
            if os.path.isabs(member.name) or os.path.commonpath([root, target]) != root:
                raise SystemExit("model.tar.gz member %r would land outside the model directory" % member.name)
            if member.issym() or member.islnk() or member.isdev() or member.isfifo():
                raise SystemExit("model.tar.gz member %r is a link or a device; refusing it" % member.name)
        if hasattr(tarfile, "data_filter"):
            bundle.extractall(root, members=members, filter="data")
        else:
            bundle.extractall(root, members=members)
    return root


def main():
    arguments = sys.argv[1:]
    while len(arguments) >= 2 and arguments[0] in DIRECTORY_OPTIONS:
        arguments = arguments[2:]
    model_dir = os.environ["TRAINOPS_MODEL_DIR"]
    archive = os.path.join(model_dir, "model.tar.gz")
    if os.path.isfile(archive):
        model_dir = extract(archive, os.path.join(os.path.dirname(model_dir.rstrip("/")), "model-extracted"))
    channel = os.environ.get("TRAINOPS_EVALUATION_CHANNEL", "test")
    channel_variable = "".join(c if c.isalnum() or c == "_" else "_" for c in channel).upper()
    output_dir = os.environ["TRAINOPS_OUTPUT_DIR"]
    os.makedirs(output_dir, exist_ok=True)
    os.environ.update({
        "SM_CHANNEL_MODEL": model_dir,
        "SM_CHANNEL_" + channel_variable: os.environ["TRAINOPS_TEST_DIR"],
        "SM_CHANNELS": json.dumps(sorted(["model", channel])),
        "SM_OUTPUT_DATA_DIR": output_dir,
        "TRAINOPS_EVALUATION_DIR": output_dir,
    })
    code_dir = os.path.dirname(os.path.abspath(__file__))
    script = os.path.join(code_dir, os.environ["TRAINOPS_EVALUATION_ENTRY_POINT"])
    os.chdir(code_dir)
    sys.path.insert(0, code_dir)
    sys.argv = [script] + arguments
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
'''


def evaluate_on_sagemaker(
    *,
    entry_point: str,
    source_dir: str | os.PathLike[str] | None,
    model_artifact: str | os.PathLike[str],
    channels: Mapping[str, str | os.PathLike[str]],
    output_dir: str | os.PathLike[str],
    hyperparameters: Mapping[str, Any] | None = None,
    environment: Mapping[str, str] | None = None,
    timeout: float | None = None,
    role: str | None = None,
    image_uri: str | None = None,
    instance_type: str = "ml.m5.xlarge",
    job_name: str | None = None,
    code_uri: str | None = None,
    client_factory: Callable[[str], Any] | None = None,
    region: str | None = None,
) -> EvaluationResult:
    """Evaluate on SageMaker: upload ``source_dir`` (and the contract bootstrap) to ``code_uri`` (default
    ``<output_dir>/code``), run a processing job on ``image_uri`` (the training image) with ``role``, and read
    ``metrics.json`` back from ``output_dir``.

    ``job_name`` defaults to a name derived from the model, output and script, so a retried task re-attaches to
    the processing job its first attempt started instead of starting another.
    """
    from trainops.backends.local.evaluate import script_arguments, validate_metrics
    from trainops.backends.sagemaker import processing
    from trainops.backends.sagemaker.names import deterministic_job_name
    from trainops.backends.sagemaker.s3 import join_uri, put_bytes
    from trainops.backends.sagemaker.uploads import upload_source_dir

    problems = []
    model_uri, output_uri = os.fspath(model_artifact), os.fspath(output_dir)
    if not role:
        problems.append(Problem("role", "the SageMaker backend needs an execution role ARN for the processing job"))
    if not image_uri:
        problems.append(Problem("image_uri", "give the image to evaluate in (normally the training image)"))
    if source_dir is None:
        problems.append(Problem("source_dir", "give the directory holding the evaluation script; it is uploaded"))
    if len(channels) != 1:
        problems.append(Problem("channels", f"a SageMaker evaluation takes exactly one data channel (an S3 prefix), "
                                            f"got {len(channels)}: {', '.join(sorted(channels)) or 'none'}"))
    if problems:
        raise SpecError(problems, source="evaluation")
    (channel_name, test_uri), = channels.items()
    factory = client_factory
    if factory is None:
        from trainops.backends.sagemaker.clients import default_client_factory

        factory = default_client_factory(region=region)
    user_arguments = script_arguments(hyperparameters)
    name = job_name or deterministic_job_name("evaluate", model_uri, output_uri, entry_point, *user_arguments)
    code_prefix = code_uri or join_uri(output_uri, "code")
    request = processing.build_evaluation_request(
        job_name=name, role_arn=role, image_uri=image_uri, model_uri=model_uri, test_data_uri=os.fspath(test_uri),
        code_uri=code_prefix, script=BOOTSTRAP_NAME, output_uri=output_uri,
        instance_type=instance_type, max_runtime_seconds=int(timeout or 3600), arguments=user_arguments,
        environment={**(environment or {}), "TRAINOPS_EVALUATION_ENTRY_POINT": entry_point,
                     "TRAINOPS_EVALUATION_CHANNEL": channel_name},
    )
    upload_source_dir(factory, source_dir, code_prefix)
    put_bytes(factory, join_uri(code_prefix, BOOTSTRAP_NAME), BOOTSTRAP_SOURCE.encode("utf-8"), "text/x-python")
    outcome = processing.evaluate(factory, request)
    metrics = validate_metrics(outcome.metrics, outcome.metrics_uri)
    return EvaluationResult(backend="sagemaker", metrics=metrics, passed=True, output_dir=output_uri,
                            metrics_path=outcome.metrics_uri, job_name=outcome.job_name)
