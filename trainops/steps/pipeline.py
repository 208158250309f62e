"""Running a pipeline file step by step: prepare, stage, train, evaluate (gate), register.

It stops at the first failed step with a message naming the step. Training is keyed by a fingerprint of its inputs
(the spec's hash and the files of its channels), so re-running a pipeline after, say, a failed evaluation re-attaches
to the finished training job instead of training again; `force=True` trains anew. Each run's results are written to
`<workdir>/pipelines/<name>/last-run.json`.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainops.backends.api import get_backend
from trainops.backends.hostfs.safe_fs import open_destination, write_file_at
from trainops.job_index import pipeline_context, remember_pipeline
from trainops.spec.names import timestamped_job_name
from trainops.spec.secrets import public_spec
from trainops.steps.attempts import cost_line, registry_note, total_cost
from trainops.steps.evaluate import evaluate
from trainops.steps.gate import parse_gates
from trainops.steps.identity import training_fingerprint, training_job_name
from trainops.steps.prepare import run_script
from trainops.steps.register import register
from trainops.steps.report import render_pipeline_report
from trainops.steps.stage import stage
from trainops.steps.train import train

if TYPE_CHECKING:
    from trainops.spec.job import JobSpec

from trainops.backends import default_backend
from trainops.backends.vocabulary import vocabulary_of
from trainops.errors import JobFailed, Problem, SpecError
from trainops.spec.pipeline import PipelineSpec, load_pipeline, resolve
from trainops.steps.plan import PipelinePlan, options_of, resolve_plan, train_spec

Log = Callable[[str], None]
logger = logging.getLogger(__name__)


@dataclass
class PipelineRun:
    """What happened to each step; `to_dict()` is written next to the pipeline's state."""

    name: str
    backend: str
    status: str = "Running"  # Succeeded | Failed | GateFailed
    message: str = ""
    steps: dict[str, dict[str, Any]] = field(default_factory=dict)
    started: float = field(default_factory=time.time)
    ended: float | None = None

    @property
    def cost(self) -> dict[str, Any]:
        """What the run's training cost, every attempt of every train step included (`trainops.steps.attempts`)."""
        return total_cost([step["cost"] for step in self.steps.values() if isinstance(step.get("cost"), dict)])

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "backend": self.backend, "status": self.status, "message": self.message,
                "steps": self.steps, "started": self.started, "ended": self.ended,
                "duration_seconds": round((self.ended or time.time()) - self.started, 3), "cost": self.cost}


class StepFailed(JobFailed):
    """A pipeline step failed; the message names it."""


def _print(line: str) -> None:
    print(line, flush=True)


class PipelineRunner:
    """Runs one pipeline; every step is a call into `trainops.steps`, the same calls Airflow and KFP make, with the
    arguments of the pipeline's `PipelinePlan` (`trainops.steps.plan.resolve_plan`)."""

    def __init__(self, pipeline: PipelineSpec, pipeline_dir: Path, *, backend: str | None = None, force: bool = False,
                 log: Log | None = None, backend_options: dict[str, Any] | None = None):
        self.pipeline = pipeline
        self.pipeline_dir = pipeline_dir
        self.backend = backend or pipeline.backend or default_backend()
        self.backend_options = backend_options
        self.force = force
        self.log = log or _print
        assert pipeline.workdir is not None  # resolve() always sets it (the default state root when none is given)
        self.workdir = Path(pipeline.workdir)
        self.run_record = PipelineRun(pipeline.name, self.backend)
        self._plan: PipelinePlan | None = None

    @property
    def plan(self) -> PipelinePlan:
        """The pipeline resolved once (paths, the training spec, the backend's settings for evaluate and register)."""
        if self._plan is None:
            self._plan = resolve_plan(self.pipeline, self.backend, pipeline_dir=self.pipeline_dir,
                                      backend_options=self.backend_options)
        return self._plan

    def run(self) -> PipelineRun:
        steps = self.pipeline.steps
        try:
            self.plan  # noqa: B018 - resolved before the first step, so bad input never half-runs a pipeline
        except SpecError as error:
            self._fail(error)
            raise
        os.close(self._open_state())  # where the run's record goes is checked before any step runs
        try:
            if steps.prepare:
                self._step("prepare", self._prepare)
            if steps.stage:
                self._step("stage", self._stage)
            trained = self._step("train", self._train)
            evaluation = self._step("evaluate", lambda: self._evaluate(trained)) if steps.evaluate else None
            if evaluation is not None and not evaluation["passed"]:
                self.run_record.status = "GateFailed"
                self.run_record.message = evaluation.get("message") or "the quality gate failed"
                if steps.evaluate is not None and steps.evaluate.on_gate_failure == "fail":
                    raise StepFailed(f"step evaluate: {self.run_record.message}")
                logger.info("[pipeline] %s: register skipped", self.run_record.message)
                return self._finish()
            if steps.register_step:
                self._step("register", lambda: self._register(trained, evaluation))
            self.run_record.status = "Succeeded"
            return self._finish()
        except (JobFailed, SpecError) as error:
            self._fail(error)
            raise

    def _fail(self, error: Exception) -> None:
        if self.run_record.status not in ("GateFailed",):
            self.run_record.status = "Failed"
        self.run_record.message = str(error)
        self._finish()

    # --- bookkeeping ------------------------------------------------------------------------------------------
    def _step(self, name: str, action: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        logger.info("[pipeline] step %s: starting", name)
        started = time.time()
        try:
            result = action()
        except SpecError as error:
            self.run_record.steps[name] = {"status": "Failed", "error": str(error)}
            raise SpecError(error.problems, f"step {name}") from None
        except JobFailed as error:
            self.run_record.steps[name] = {"status": "Failed", "error": str(error),
                                           **(getattr(error, "result", None) or {})}
            if isinstance(error, StepFailed):
                raise
            raise StepFailed(f"step {name} failed: {error}") from None
        result = {"status": "Succeeded", **result, "seconds": round(time.time() - started, 3)}
        self.run_record.steps[name] = result
        logger.info("[pipeline] step %s: %s (%.1f s)", name, result.get("summary") or "done", result["seconds"])
        return result

    def _finish(self) -> PipelineRun:
        self.run_record.ended = time.time()
        # The work directory may be shared (a team's volume, a PVC): written as any directory trainops does not own,
        # below an open handle, through an unguessable temporary, never through a link planted under either name.

        record = self.run_record.to_dict()
        data = json.dumps(record, indent=2, default=str).encode("utf-8")
        state = self._open_state()
        try:
            write_file_at(state, "last-run.json", data, 0o644)
            # The run's page (`trainops report NAME` shows it): the steps, the training job, the evaluation.
            write_file_at(state, REPORT_FILE, pipeline_page(json.loads(data)).encode("utf-8"), 0o644)
        finally:
            os.close(state)

        remember_pipeline(self.pipeline.name, str(self.workdir), str(self.record_path), self.run_record.started,
                          self.backend)
        return self.run_record

    @property
    def record_path(self) -> Path:
        """The run's ``last-run.json``; its page, `REPORT_FILE`, lies beside it."""
        return self.workdir / "pipelines" / self.pipeline.name / "last-run.json"

    def _open_state(self) -> int:
        """``<workdir>/pipelines/<name>`` held open (created when missing); `SpecError` on ``workdir`` when trainops
        could not write its record there safely (a link, a directory of another user)."""
        try:
            return open_destination(self.workdir, ["pipelines", self.pipeline.name])
        except OSError as error:
            raise SpecError(Problem("workdir", f"the pipeline's record cannot be written under "
                                               f"{self.workdir / 'pipelines' / self.pipeline.name}: {error}; give "
                                               "the pipeline a work directory of your own")) from None

    # --- steps ------------------------------------------------------------------------------------------------
    def _prepare(self) -> dict[str, Any]:
        step = self.plan.prepare
        assert step is not None  # only called when the pipeline has the step
        summary = run_script(step.script, step.args, cwd=str(self.pipeline_dir), timeout=step.timeout, log=self.log)
        return {"summary": summary}

    def _stage(self) -> dict[str, Any]:
        step = self.plan.stage
        assert step is not None  # only called when the pipeline has the step
        options = {"s3_prefix": step.s3_prefix} if step.s3_prefix else {}
        destination = step.destination
        report = stage(step.source, destination, backend=self.plan.backend, backend_options=self.plan.backend_options,
                       workers=step.workers, **options)
        return {"destination": destination, "report": report,
                "summary": report.get("summary") or f"staged into {destination}"}

    def _train_spec(self) -> JobSpec:
        return train_spec(self.pipeline, self.pipeline_dir, self.backend)

    def _train(self) -> dict[str, Any]:
        step = self.plan.train
        spec = step.spec
        fingerprint = training_fingerprint(spec, step.channels)
        if step.job_name:
            job_name = step.job_name
        elif self.force:
            job_name = timestamped_job_name(spec.name or self.pipeline.name)
        else:
            job_name = training_job_name(spec, step.channels, base=self.pipeline.name)
        # What the pipeline file says goes to the backend, which refuses an option it does not take. The runner's
        # own checkpoint key (checkpoints follow the job's identity: a retry of a failed run resumes, new data or
        # --force starts over) goes only to a backend whose options type takes one (SageMaker keeps checkpoints
        # under the spec's checkpoint_s3_uri).
        options = vocabulary_of(self.plan.backend).takes({"checkpoint_key": job_name})

        with pipeline_context(self.pipeline.name, str(self.record_path)):  # its jobs name the pipeline in the index
            result = train(spec, backend=self.plan.backend, backend_options=self.plan.backend_options,
                           job_name=job_name, if_exists="reattach", log=self.log, workdir=self.plan.workdir,
                           region=self.plan.region, processes_per_host=step.processes_per_host,
                           channel_overrides=step.channels, retries=step.retries, **options)
        if result.get("reattached"):
            logger.info("[pipeline] training skipped: job %s already completed with the same inputs (spec hash and "
                        "data); use --force to train again", result["job_name"])
        # The record (last-run.json, the registry entry) shows secret-looking environment values masked.
        return {**result, "fingerprint": fingerprint, "spec": public_spec(spec),
                "summary": f"{result['job_name']} {result['status']}; {cost_line(result.get('cost'))}"}

    def _evaluate(self, trained: dict[str, Any]) -> dict[str, Any]:
        result = evaluate(**self.plan.evaluate_arguments(trained["model_artifact"], trained["job_name"]))
        data = result.to_dict()
        metrics = ", ".join(f"{key}={value:.4g}" if isinstance(value, (int, float)) else f"{key}={value}"
                            for key, value in (data.get("metrics") or {}).items())
        gate = data.get("gate") or {}
        data["message"] = gate.get("message", "")
        data["summary"] = f"{metrics}; {data['message'] or 'no gate'}"
        return data

    def _register(self, trained: dict[str, Any], evaluation: dict[str, Any] | None) -> dict[str, Any]:
        step = self.plan.register
        assert step is not None  # only called when the pipeline has the step
        # The entry says what the model cost to train, every attempt included, against its forecast and budget.
        arguments = self.plan.register_arguments()
        arguments["description"] = "; ".join(filter(None, [
            arguments.get("description"), registry_note(trained["job_name"], trained.get("cost"))]))
        entry = register(model_artifact=trained["model_artifact"], metrics=(evaluation or {}).get("metrics") or {},
                         spec=trained.get("spec"), job_name=trained["job_name"], **arguments)
        version = entry.get("version") or entry.get("location")
        return {**entry, "summary": f"{step.group} version {version} ({step.approval})"}


def check_pipeline(pipeline: PipelineSpec, pipeline_dir: Path, backend: str | None = None,
                   source: str = "pipeline", backend_options: dict[str, Any] | None = None) -> None:
    """Every input problem the steps would only meet one by one, found before any step runs.

    A pipeline that trains for an hour and then stops at a misspelt gate, or one whose prepare step ran before its
    inline job spec was read, wastes the run; so the train spec, the gate, and the scripts and code the steps name
    are checked first, each problem at its path in the pipeline file (`steps.train.spec.instance_count`). Raises one
    `SpecError` holding them all.
    """
    steps = pipeline.steps
    backend = backend or pipeline.backend or default_backend()
    problems: list[Problem] = []

    def within(prefix: str, error: SpecError, note: str = "") -> None:
        for problem in error.problems:
            path = f"{prefix}.{problem.path}" if problem.path else prefix
            problems.append(Problem(path, problem.message + note))

    def must_exist(path: str, directory: Path, field: str) -> None:
        if not (directory / path).is_file():
            problems.append(Problem(field, f"{path} is not a file in {directory}"))

    spec = None
    try:
        spec = PipelineRunner(pipeline, pipeline_dir, backend=backend)._train_spec()
    except SpecError as error:
        raw = steps.train.spec
        note = f" (in {error.source})" if isinstance(raw, str) and error.source else ""
        within("steps.train.spec", error, note)
    if spec is not None:
        chosen = None
        try:
            chosen = get_backend(backend, options=options_of(pipeline, backend, backend_options),
                                 source="backend_options", workdir=pipeline.workdir)
        except SpecError as error:
            problems.extend(error.problems)
        try:  # what the backend needs of the spec (local: the code directory; SageMaker: role, image, output...)
            if chosen is not None:
                # With what the runner will hand the backend (the front-end options it declares it takes).
                given = vocabulary_of(chosen).takes({
                    "processes_per_host": steps.train.processes_per_host,
                    "channel_overrides": {name: resolve(value, pipeline_dir)
                                          for name, value in steps.train.channels.items()} or None})
                chosen.check_spec(spec, spec.region or pipeline.region, options=given)
                chosen.pipeline_settings(spec, spec.region or pipeline.region)
        except SpecError as error:
            within("steps.train.spec", error)
    if steps.prepare:
        script = Path(resolve(steps.prepare.script, pipeline_dir))
        if not script.is_file():
            problems.append(Problem("steps.prepare.script", f"{script} is not a file"))
    if steps.evaluate:
        if steps.evaluate.gate is not None:
            try:
                parse_gates(steps.evaluate.gate, "steps.evaluate.gate")
            except SpecError as error:
                problems.extend(error.problems)
        must_exist(steps.evaluate.entry_point, Path(resolve(steps.evaluate.source_dir or ".", pipeline_dir)),
                   "steps.evaluate.entry_point")
    if problems:
        raise SpecError(problems, source)


def run_pipeline_file(path: str, *, backend: str | None = None, force: bool = False, workdir: str | None = None,
                      log: Log | None = None, backend_options: dict[str, Any] | None = None) -> int:
    """`trainops run pipeline.yaml`: check it whole, run it and print a summary; returns the exit code (0, 1).

    Invalid input (exit 2) is found before any step runs; see `check_pipeline`.
    """
    pipeline = load_pipeline(path, workdir_override=workdir)
    check_pipeline(pipeline, Path(path).resolve().parent, backend, source=str(path), backend_options=backend_options)
    runner = PipelineRunner(pipeline, Path(path).resolve().parent, backend=backend, force=force, log=log,
                            backend_options=backend_options)
    try:
        record = runner.run()
    except (JobFailed, SpecError) as error:
        logger.info("[pipeline] %s: %s: %s", pipeline.name, runner.run_record.status, error)
        if isinstance(error, SpecError):
            raise
        for line in result_lines(runner):
            logger.info("%s", line)
        return 1

    logger.info("[pipeline] %s: %s in %.1f s%s; training %s", pipeline.name, record.status,
                record.to_dict()["duration_seconds"], f" ({record.message})" if record.message else "",
                cost_line(record.cost))
    for line in result_lines(runner):
        logger.info("%s", line)
    return 0


def result_lines(runner: PipelineRunner) -> list[str]:
    """The run's last lines: where its record, its page and its plots are, and the command that shows the page."""
    found = [f"[pipeline] results: {runner.record_path}",
             f"[pipeline] report:  {runner.record_path.parent / REPORT_FILE}  (trainops report {runner.pipeline.name})"]
    evaluation = runner.run_record.steps.get("evaluate") or {}
    found += [f"[pipeline] plot:    {plot}" for plot in evaluation.get("plots") or []]
    return found


REPORT_FILE = "report.html"


def pipeline_page(record: dict[str, Any]) -> str:
    """The HTML page of a pipeline run's record (`trainops.steps.report.render_pipeline_report`)."""
    return render_pipeline_report(record, title=f"Pipeline {record.get('name', '')}")
