"""A pipeline file (`trainops.spec.pipeline`) as the arguments of the retraining DAG's tasks.

`trainops run pipeline.yaml` (``make run``) and the ``retrain_pipeline`` DAG read the same file, so both retrain the
same way. The DAG's first task calls `resolve_pipeline_steps` at run time (never at parse time: the pipeline model is
pydantic, too slow for DAG parsing) and returns a flat mapping; with ``multiple_outputs`` each key is an XCom of its
own, which the later operators take as arguments (``prepare["train_spec"]``).

Differences from the pipeline runner, on purpose: the training job is named from the task instance (re-attach on
retry, see `trainops.operators.common.task_job_name`) rather than from the input fingerprint, and the work directory
defaults to ``$AIRFLOW_HOME/trainops`` instead of the file's (a DAG never writes into the repository it came from).

Function-local imports (DAG-parse path): a DAG file imports the operators (bench/dag_parse.py measures it); the
steps, the spec and the backends load when a task runs.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

#: Steps the DAG has a task for; the pipeline file must describe each of them.
REQUIRED_STEPS = ("stage", "train", "evaluate", "register")
#: The pipeline file's ``on_gate_failure`` in the operators' vocabulary.
GATE_FAILURE = {"fail": "fail", "skip_register": "skip_downstream"}


def default_workdir() -> str:
    """``$AIRFLOW_HOME/trainops`` (``~/airflow/trainops`` when AIRFLOW_HOME is not set)."""
    home = os.environ.get("AIRFLOW_HOME") or os.path.join(os.path.expanduser("~"), "airflow")
    return os.path.join(home, "trainops")


#: The Airflow Variables through which a deployment widens what the retraining DAG may read and where it writes.
PIPELINE_DIRS_VARIABLE = "trainops_pipeline_dirs"
WORKDIR_VARIABLE = "trainops_workdir"
#: Fields a DAG run's conf may override only when the DAG author lists them (``conf_overridable``).
OVERRIDABLE = ("role", "image_uri", "output_path")


def allowed_pipeline_dirs(author_dirs: list[str] | tuple[str, ...], variable: Any = None) -> list[Path]:
    """The directories pipeline files may come from: the DAG author's, plus the deployment's Airflow Variable
    (`PIPELINE_DIRS_VARIABLE`: a JSON list, or paths separated by ``:``), each resolved (links followed)."""
    import json

    extra: list[str] = []
    if variable:
        text = str(variable).strip()
        extra = json.loads(text) if text.startswith("[") else [part for part in text.split(os.pathsep) if part]
    return [Path(directory).expanduser().resolve() for directory in [*author_dirs, *extra]]


def check_pipeline_file(pipeline_file: str | os.PathLike[str], allowed: list[Path]) -> Path:
    """The pipeline file resolved, or `SpecError` naming ``pipeline_file`` when it lies outside every allowed
    directory: whoever may trigger the DAG (with a conf) must not make the worker run another prepare script."""
    from trainops.errors import Problem, SpecError

    path = Path(pipeline_file).expanduser().resolve()
    if not any(path == directory or directory in path.parents for directory in allowed):
        shown = ", ".join(str(directory) for directory in allowed) or "none"
        raise SpecError(Problem("pipeline_file", f"{path} is not inside a directory this DAG reads pipeline files "
                                                 f"from ({shown}); the DAG's author adds directories (the DAG's "
                                                 f"pipeline_dirs, or the Airflow Variable {PIPELINE_DIRS_VARIABLE})"),
                        source="DAG run conf")
    return path


def check_conf_keys(conf: Mapping[str, Any] | None, accepted: Iterable[str]) -> None:
    """Refuse a DAG run's conf with a key the DAG does not take (a typo such as ``hyperparameter`` would otherwise
    run with the default), naming every such key and the keys it takes."""
    from trainops.errors import Problem, SpecError

    names = sorted(accepted)
    unknown = sorted(str(key) for key in (conf or {}) if key not in names)
    if unknown:
        raise SpecError([Problem(key, f"this DAG takes no such key; it takes {', '.join(names)}") for key in unknown],
                        source="DAG run conf")


def steps_for_run(
    params: Mapping[str, Any],
    conf: Mapping[str, Any] | None,
    *,
    accepted: Iterable[str],
    allowed_dirs: Sequence[str | os.PathLike[str]],
    conf_overridable: Sequence[str] = (),
    run_id: str = "manual",
) -> dict[str, Any]:
    """Every task's arguments for a DAG run whose settings may come from its conf, i.e. from whoever may trigger the
    DAG: what a DAG's first task calls (the retraining DAG's ``prepare``).

    Args:
        params: the run's params (``pipeline_file``, ``backend``, ``hyperparameters``, ``overrides``), the conf's
            values laid over the DAG's defaults, as Airflow hands them to a task.
        conf: the run's conf as given (``dag_run.conf``): a key outside ``accepted`` is refused, with the list.
        accepted: the conf keys the DAG takes (its params' names).
        allowed_dirs: the directories the pipeline file may come from (the DAG author's; the deployment adds more
            with the Airflow Variable `PIPELINE_DIRS_VARIABLE`). Required: a conf naming another pipeline file would
            otherwise make the worker run that file's prepare script.
        conf_overridable: the training spec fields the conf's ``overrides`` may set (`OVERRIDABLE` fields only).
        run_id: the DAG run, which names the evaluation directory.

    The work directory is the deployment's, never the conf's (the Variable `WORKDIR_VARIABLE`, else
    `default_workdir`). Raises `SpecError` naming each problem's field.
    """
    from trainops.operators.compat import get_variable

    check_conf_keys(conf, accepted)
    allowed = allowed_pipeline_dirs(list(map(str, allowed_dirs)), get_variable(PIPELINE_DIRS_VARIABLE))
    path = check_pipeline_file(params["pipeline_file"], allowed)
    overrides = check_overrides(params.get("overrides"), tuple(conf_overridable))
    return resolve_pipeline_steps(path, workdir=get_variable(WORKDIR_VARIABLE) or None, backend=params["backend"],
                                  run_id=run_id, overrides=overrides, hyperparameters=params.get("hyperparameters"))


def check_overrides(overrides: dict[str, Any] | None, allowed: tuple[str, ...] | list[str]) -> dict[str, Any]:
    """The conf's overrides of the training spec, each one the DAG author allowed (`OVERRIDABLE` fields only)."""
    from trainops.errors import Problem, SpecError

    overrides = dict(overrides or {})
    problems = [Problem(f"overrides.{key}", "a DAG run's conf may not set this: the DAG's author allows it "
                                            f"(conf_overridable; possible: {', '.join(OVERRIDABLE)})")
                for key in sorted(overrides) if key not in allowed or key not in OVERRIDABLE]
    if problems:
        raise SpecError(problems, source="DAG run conf")
    return overrides


def _safe(text: str) -> str:
    # Run ids hold ':' and '+' (timestamps): keep directory names portable.
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "run"


def resolve_pipeline_steps(
    pipeline_file: str | os.PathLike[str],
    *,
    workdir: str | None = None,
    backend: str | None = None,
    hyperparameters: dict[str, Any] | None = None,
    run_id: str = "manual",
    overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Read and validate a pipeline file; return every task's arguments as one flat JSON mapping. A path that comes
    from a DAG run's conf goes through `steps_for_run` instead, which checks it against the allowed directories.

    Args:
        pipeline_file: the pipeline YAML (relative paths in it resolve against its directory).
        workdir: local state (staged data, jobs, registry); default `default_workdir`.
        backend: overrides the file's backend.
        hyperparameters: merged over the training spec's (a quick run: ``{"epochs": 2}``).
        run_id: the DAG run, which names the evaluation directory.
        overrides: training spec fields set over the file's (checked first with `check_overrides`).

    Raises `SpecError` (every problem, with its field) for a bad file, a bad spec or a missing step.
    """
    from trainops.errors import SpecError
    from trainops.spec.pipeline import load_pipeline
    from trainops.spec.secrets import masked_spec_document
    from trainops.steps.plan import resolve_plan
    from trainops.steps.train import load_spec

    path = Path(pipeline_file).resolve()
    problems = []
    try:
        pipeline = load_pipeline(path, workdir_override=str(Path(workdir or default_workdir()).resolve()))
    except SpecError as error:
        pipeline, problems = None, list(error.problems)
    # One failure lists everything: the file's own problems, the steps the DAG misses and the job spec's problems.
    problems += _missing_steps(pipeline, path)
    problems += _backend_problems(backend or (pipeline.backend if pipeline is not None else
                                              _raw_document(path).get("backend")))
    spec, spec_problems = _train_spec(pipeline, path, backend)
    problems += spec_problems
    if problems:
        raise SpecError(problems, str(path))
    if hyperparameters or overrides:
        merged = spec.to_json_dict()
        merged["hyperparameters"] = {**merged.get("hyperparameters", {}), **(hyperparameters or {})}
        merged.update(overrides or {})  # only fields the DAG author allowed (`check_overrides`)
        # The merged spec must still be valid (by its backend's rules); fail here, naming the field, not later.
        spec = load_spec(merged, backend=backend or (pipeline.backend if pipeline is not None else None))
    # The values every front end shares come from the one resolution (trainops.steps.plan); on SageMaker that
    # includes the role, image and region the evaluate and register tasks need.
    plan = resolve_plan(pipeline, backend, pipeline_dir=path.parent, spec=spec)
    steps = plan.to_dict()
    assert plan.evaluate is not None  # the retraining DAG's pipeline file has an evaluate step (checked above)
    steps.update(
        pipeline_file=str(path),
        train_spec=masked_spec_document(steps["train_spec"]),  # XComs are read by many: secrets stay masked
        evaluate_on_gate_failure=GATE_FAILURE[plan.evaluate.on_gate_failure],
        # Keyed by the run: the training job's name is decided by the train task (from its task instance).
        evaluate_output_dir=plan.evaluation_output(_safe(run_id)),
    )
    return steps


def _raw_document(path: Path) -> dict[str, Any]:
    from trainops.spec.loader import read_document

    try:
        document = read_document(path)
    except Exception:  # noqa: BLE001 - an unreadable file is already one of load_pipeline's problems
        return {}
    return document if isinstance(document, dict) else {}


def _raw_steps(path: Path) -> dict[str, Any]:
    steps = _raw_document(path).get("steps")
    return steps if isinstance(steps, dict) else {}


def _backend_problems(name: Any) -> list:
    """The problem of a backend no backend is registered under (the file's, or the run's choice), with the rest."""
    from trainops.backends import check_backend_name
    from trainops.errors import SpecError

    if not name:
        return []
    try:
        check_backend_name(str(name))
    except SpecError as error:
        return list(error.problems)
    return []


def _missing_steps(pipeline: Any, path: Path) -> list:
    """A problem for each step the DAG has a task for and the file does not describe (read from the raw file when
    it did not validate, so these come with the file's other problems)."""
    from trainops.errors import Problem

    if pipeline is not None:
        present = {name for name in REQUIRED_STEPS
                   if getattr(pipeline.steps, "register_step" if name == "register" else name) is not None}
    else:
        present = {name for name, value in _raw_steps(path).items() if value is not None}
    return [Problem(f"steps.{name}", "the retraining DAG has a task for this step: describe it")
            for name in REQUIRED_STEPS if name not in present]


def _train_spec(pipeline: Any, path: Path, backend: str | None = None) -> tuple[Any, list]:
    """(the training job spec, its problems with fields under ``steps.train.spec``, by the spec rules of ``backend``,
    else the file's); the spec is None when invalid or not described."""
    from trainops.errors import Problem, SpecError
    from trainops.spec.pipeline import resolve
    from trainops.steps.train import load_spec

    here = path.parent
    if pipeline is not None:
        given = pipeline.steps.train.spec
    else:  # the file did not validate: still check the spec it names, as written
        train = _raw_steps(path).get("train")
        given = train.get("spec") if isinstance(train, dict) else None
        if not isinstance(given, (str, dict)) or (isinstance(given, str) and "${" in given):
            return None, []  # missing, of the wrong type or using variables: load_pipeline has said so already
    chosen = backend or (pipeline.backend if pipeline is not None else None)
    try:
        if isinstance(given, str):
            return load_spec(resolve(given, here), backend=chosen), []
        return load_spec(given, base_dir=here, backend=chosen), []
    except SpecError as error:
        where = f" ({error.source})" if error.source and isinstance(given, str) else ""
        return None, [Problem(f"steps.train.spec.{problem.path}" if problem.path else "steps.train.spec",
                              f"{problem.message}{where}") for problem in error.problems]


def run_prepare_step(steps: dict[str, Any], *, log: Callable[[str], None]) -> str | None:
    """Run the pipeline's ``prepare`` script (the data export) from `resolve_pipeline_steps`' result, with the prepare
    step `trainops run` uses (`trainops.steps.prepare.run_script`); None when the pipeline has no prepare step."""
    from trainops.steps.prepare import run_script

    if not steps.get("prepare_script"):
        return None
    return run_script(steps["prepare_script"], list(steps["prepare_args"]),
                      cwd=str(Path(steps["pipeline_file"]).parent), timeout=steps["prepare_timeout"], log=log)
