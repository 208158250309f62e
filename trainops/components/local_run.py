"""`trainops kfp run-local`: the KFP pipeline of a pipeline file, run by ``kfp.local`` on this machine.

``kfp.local.SubprocessRunner(use_venv=False)`` runs each component as a subprocess of the current Python, and the
components are built with nothing to install (`LOCAL_SETTINGS`): no virtual environment, no pip, no network. The
jobs run on the registry's default backend (the local one, offline) whatever the file says, unless ``--backend``
names another (an installed or named backend is reached as from any front end). KFP's outputs go under
``<workdir>/kfp`` (the pipeline file's workdir, ``--workdir``, or ``$TRAINOPS_HOME``), never into the current
directory.

kfp.local reports the state of tasks only as log lines ("Task 'train-model' finished with status SUCCESS"), so a
filter on the root logger records them while the pipeline runs; each task's outputs are read back from its
``executor_output.json`` (``<pipeline root>/<run>/<task>/``). A task with no such line never started: a gate branch
not taken (SKIPPED) or a task after a failure (NOT_RUN).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainops.backends import default_backend
from trainops.components.pipeline import build_pipeline, read_pipeline_source
from trainops.components.settings import LOCAL_SETTINGS
from trainops.runtime.untrusted import read_bounded
from trainops.steps.plan import resolve_plan

logger = logging.getLogger(__name__)

#: The tasks of `retrain_pipeline`, in the order they run (task directory names are the component names).
TASK_ORDER = ("prepare-data", "stage-data", "train-model", "evaluate-model", "register-model", "gate-failed")
EXECUTOR_OUTPUT = "executor_output.json"
#: A task's outputs are a few parameters and artifact references: anything larger is not what kfp.local wrote.
MAX_EXECUTOR_OUTPUT_BYTES = 16 * 1024 * 1024
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_FINISHED = re.compile(r"^Task '?(?P<task>[\w.-]+)'? finished with status (?P<status>[A-Z]+)")
_PIPELINE = re.compile(r"^Pipeline '?(?P<pipeline>[\w.-]+)'? finished with status (?P<status>[A-Z]+)")


class KfpLogRecorder(logging.Filter):
    """Records kfp.local's task and pipeline states from its log records, letting every record through."""

    def __init__(self) -> None:
        super().__init__()
        self.tasks: dict[str, str] = {}
        self.pipeline_status: str | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            text = _ANSI.sub("", record.getMessage())
        except Exception:  # noqa: BLE001 - a record that cannot be formatted is not ours to judge
            return True
        task = _FINISHED.match(text)
        if task:
            self.tasks[task.group("task")] = "SUCCEEDED" if task.group("status") == "SUCCESS" else "FAILED"
        pipeline = _PIPELINE.match(text)
        if pipeline:
            self.pipeline_status = pipeline.group("status")
        return True


@dataclass
class TaskState:
    """What happened to one task: SUCCEEDED, FAILED, SKIPPED (a gate branch not taken) or NOT_RUN."""

    name: str
    state: str
    parameters: dict[str, Any] = field(default_factory=dict)
    artifacts: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def artifact(self, name: str) -> dict[str, Any]:
        """The first artifact of an output (uri, metadata), or an empty dict."""
        found = self.artifacts.get(name) or []
        return found[0] if found else {}


@dataclass
class LocalRunOutcome:
    """The tasks of one local run and where its outputs are."""

    pipeline: str
    run_dir: Path | None
    tasks: dict[str, TaskState]
    pipeline_status: str | None = None

    @property
    def succeeded(self) -> bool:
        """True when kfp.local reported the pipeline a success and no task failed."""
        return self.pipeline_status == "SUCCESS" and not any(task.state == "FAILED" for task in self.tasks.values())

    @property
    def metrics(self) -> dict[str, Any]:
        """The metrics the evaluate task logged (its Metrics artifact's metadata)."""
        task = self.tasks.get("evaluate-model")
        return dict(task.artifact("metrics").get("metadata") or {}) if task else {}


def read_task(name: str, state: str, task_dir: Path | None) -> TaskState:
    """A task's state, with its outputs when its directory holds an executor output."""
    output = task_dir / EXECUTOR_OUTPUT if task_dir is not None else None
    if output is None or not output.exists():
        return TaskState(name, state)
    try:  # what the task's process wrote: read bounded, a regular file only, and checked before it is used
        data = json.loads(read_bounded(output, MAX_EXECUTOR_OUTPUT_BYTES, whole=True))
        if not isinstance(data, dict):
            raise ValueError(f"holds a JSON {type(data).__name__}, not an object")
    except (OSError, ValueError) as error:
        logger.warning("[kfp] %s: its outputs are not read: %s %s", name, output, error)
        return TaskState(name, state)
    artifacts = {key: entry.get("artifacts") or [] for key, entry in (data.get("artifacts") or {}).items()}
    return TaskState(name, state, parameters=dict(data.get("parameterValues") or {}), artifacts=artifacts)


def collect_tasks(run_dir: Path | None, expected: list[str], finished: dict[str, str]) -> dict[str, TaskState]:
    """Every expected task's state (as kfp.local reported it, else SKIPPED / NOT_RUN) and outputs."""
    tasks: dict[str, TaskState] = {}
    for name in expected:
        if name in finished:
            tasks[name] = read_task(name, finished[name], run_dir / name if run_dir else None)
    evaluate = tasks.get("evaluate-model")
    passed = evaluate.parameters.get("Output") if evaluate and evaluate.state == "SUCCEEDED" else None
    for name in expected:
        if name not in tasks:
            branch_not_taken = (name == "register-model" and passed is False) or (name == "gate-failed" and passed)
            tasks[name] = TaskState(name, "SKIPPED" if branch_not_taken else "NOT_RUN")
    return {name: tasks[name] for name in expected}


def expected_tasks(source) -> list[str]:
    """The tasks the pipeline of this file has."""
    steps = source.pipeline.steps
    present = {
        "prepare-data": steps.prepare is not None,
        "stage-data": steps.stage is not None,
        "train-model": True,
        "evaluate-model": steps.evaluate is not None,
        "register-model": steps.register_step is not None,
        "gate-failed": steps.evaluate is not None and steps.evaluate.on_gate_failure == "fail",
    }
    return [name for name in TASK_ORDER if present[name]]


def describe(task: TaskState) -> str:
    """One line about a task: its state and what it produced."""
    values = task.parameters
    detail = ""
    if task.name == "train-model" and task.state == "SUCCEEDED":
        detail = f"job {values.get('job_name')} {values.get('status')}" + \
                 (" (re-attached)" if values.get("reattached") else "") + f", model {values.get('model_artifact')}"
    elif task.name == "evaluate-model" and task.state == "SUCCEEDED":
        detail = str(task.artifact("report").get("metadata", {}).get("message") or "")
    elif task.name == "register-model" and task.state == "SUCCEEDED":
        detail = f"version {values.get('version')} ({values.get('approval_status')}) at {values.get('location')}"
    elif task.name == "gate-failed" and task.state == "FAILED":
        detail = "the model missed its quality gate and was not registered (on_gate_failure: fail)"
    elif task.name == "register-model" and task.state == "SKIPPED":
        detail = "the model missed its quality gate"
    elif task.name == "stage-data" and task.state == "SUCCEEDED":
        detail = f"{values.get('destination')}: {values.get('summary_json')}"
    return f"{task.state}" + (f": {detail}" if detail else "")


def run_local(path: str, *, workdir: str | None = None, gate: str | None = None, run_key: str = "",
              log: Callable[[str], None] = print, backend: str | None = None,
              backend_options: dict[str, Any] | None = None) -> LocalRunOutcome:
    """Run the pipeline of a pipeline file with kfp.local (subprocesses, nothing installed); print each task's state
    and the metrics; return the outcome. ``backend``: where the jobs run (default: the registry's default, never
    the file's: a run on this machine stays offline unless asked); ``backend_options``: its settings, laid over the
    file's when it is the file's backend."""
    import kfp.local
    from kfp.local import config as local_config


    source = read_pipeline_source(path, workdir_override=workdir, backend=backend or default_backend())

    plan = resolve_plan(source.resolved, backend or default_backend(), pipeline_dir=source.directory,
                        backend_options=backend_options)
    if source.pipeline.backend and plan.backend != source.pipeline.backend:
        log(f"[kfp] {path} says backend {source.pipeline.backend}: this run uses the {plan.backend} backend")
    state_dir = Path(source.resolved.workdir or ".")  # absolute: the file's workdir, --workdir or $TRAINOPS_HOME
    pipeline_root = state_dir / "kfp"
    pipeline_root.mkdir(parents=True, exist_ok=True)
    kfp.local.init(runner=kfp.local.SubprocessRunner(use_venv=False), pipeline_root=str(pipeline_root),
                   raise_on_error=False)
    try:
        pipeline = build_pipeline(source, LOCAL_SETTINGS, pipeline_dir=str(source.directory))
        arguments = {"backend": plan.backend, "workdir": str(state_dir), "pipeline_dir": str(source.directory),
                     "run_key": run_key, "backend_options": json.dumps(plan.backend_options, sort_keys=True)}
        if gate is not None:
            arguments["gate"] = gate
        before = {entry.name for entry in pipeline_root.iterdir()}
        recorder = KfpLogRecorder()
        logging.getLogger().addFilter(recorder)
        try:
            # spec_json carries secrets masked, as on a cluster; the components (subprocesses of this process) find
            # them in their environment, as a pod finds a Kubernetes secret.
            with secrets_in_environment(source.secrets):
                pipeline(**arguments)
        finally:
            logging.getLogger().removeFilter(recorder)
    finally:
        local_config.LocalExecutionConfig.instance = None  # later kfp calls in this process are not local runs
    created = sorted(entry for entry in pipeline_root.iterdir() if entry.is_dir() and entry.name not in before)
    run_dir = created[-1] if created else None
    outcome = LocalRunOutcome(source.pipeline.name, run_dir,
                              collect_tasks(run_dir, expected_tasks(source), recorder.tasks),
                              pipeline_status=recorder.pipeline_status)
    report(outcome, log)
    return outcome


@contextlib.contextmanager
def secrets_in_environment(secrets: dict[str, str]) -> Iterator[None]:
    """Set the spec's secret variables in this process's environment while the block runs, then put back what was."""
    saved = {name: os.environ.get(name) for name in secrets}
    os.environ.update(secrets)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def report(outcome: LocalRunOutcome, log: Callable[[str], None]) -> None:
    """Print each task's state, the metrics and where the outputs are."""
    log(f"[kfp] pipeline {outcome.pipeline}: {'SUCCEEDED' if outcome.succeeded else 'FAILED'}")
    for task in outcome.tasks.values():
        log(f"[kfp]   {task.name:<15} {describe(task)}")
    metrics = outcome.metrics
    if metrics:
        log("[kfp] metrics: " + ", ".join(f"{name}={value:.6g}" if isinstance(value, (int, float))
                                          else f"{name}={value}" for name, value in sorted(metrics.items())))
    evaluate = outcome.tasks.get("evaluate-model")
    if evaluate and evaluate.artifact("report"):
        log(f"[kfp] report: {evaluate.artifact('report').get('uri')}")
    if outcome.run_dir is not None:
        log(f"[kfp] outputs: {outcome.run_dir}")
