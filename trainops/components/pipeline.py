"""`retrain_pipeline`: a pipeline file (stage -> train -> evaluate -> gate -> register) as a KFP v2 pipeline.

The pipeline file stays the one description: `trainops run` runs it step by step, this module turns it into a KFP
pipeline whose tasks are the trainops components:

    prepare-data -> stage-data -> train-model -> evaluate-model -> dsl.If(passed) -> register-model
                                                                 \\-> dsl.If(not passed) -> gate-failed

(prepare and stage when the file has them; gate-failed when ``on_gate_failure`` is ``fail``, the default, so a model
that misses its gate fails the run as it fails `trainops run`). Values are kept as the file writes them
(``${workdir}/raw``, ``train.yaml``'s relative ``source_dir``) and resolved by each component where it runs, so the
compiled YAML is the same on every machine. Run-level choices are pipeline parameters: ``spec_json`` (the job spec),
``backend`` and ``backend_options`` (its one mapping of settings, JSON: the file's ``backend_options``), ``workdir``,
``pipeline_dir``, ``gate``, ``run_key`` (part of the training job's name: give each scheduled run its own, e.g. the
schedule time) and ``region``. Caching is off for every task: the data behind a path
can change between runs, and training re-attaches on its own.

No ``from __future__ import annotations`` in this module: KFP reads the pipeline function's annotations as types.
"""

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from trainops.backends import backend_class
from trainops.components.cluster import check_cluster
from trainops.components.paths import encode_parameter, placeholder_in
from trainops.components.settings import IMAGE_WORKDIR, ComponentSettings, check_lightweight
from trainops.errors import Problem, SpecError
from trainops.spec.loader import problems_from_validation_error, read_document
from trainops.spec.pipeline import PipelineSpec, load_pipeline, resolve
from trainops.spec.secrets import masked_spec_document, secret_environment_names, secret_held_by
from trainops.steps.plan import resolve_plan
from trainops.steps.train import load_spec


@dataclass(frozen=True)
class PipelineSource:
    """A pipeline file read for KFP: validated, with its values as written (variables kept).

    Attributes:
        pipeline: the pipeline, values as written (``${workdir}`` kept, paths relative).
        resolved: the same pipeline as `trainops run` reads it (variables substituted, paths absolute).
        spec_document: the training job spec as JSON data, as written.
        spec_dir: the spec's directory, relative to the pipeline file's (its relative paths resolve against it).
        directory: the pipeline file's directory on this machine.
    """

    pipeline: PipelineSpec
    resolved: PipelineSpec
    spec_document: dict[str, Any]
    spec_dir: str
    directory: Path

    @property
    def plan(self):
        """The pipeline resolved as `trainops run` and the retraining DAG resolve it (`trainops.steps.plan`)."""
        return resolve_plan(self.resolved, None, pipeline_dir=self.directory)

    @property
    def spec_json(self) -> str:
        """The job spec as the JSON string the pipeline parameter carries (keys sorted: stable output), its secret
        environment values masked (`trainops.spec.secrets`): the compiled YAML is read by anyone who can see the
        pipeline; the train component takes them from its pod's environment."""
        # Encoded: KFP would substitute a placeholder inside one of the spec's values (`encode_parameter`).
        return encode_parameter(masked_spec_document(self.spec_document))

    @property
    def secrets(self) -> dict[str, str]:
        """The secret environment values of the job spec, by name (what `spec_json` masks)."""
        environment = self.spec_document.get("environment")
        if not isinstance(environment, dict):
            return {}
        return {name: str(environment[name]) for name in secret_environment_names(environment)}


def read_pipeline_source(path: str | os.PathLike, workdir_override: str | None = None,
                         backend: str | None = None) -> PipelineSource:
    """Read and validate a pipeline file and its job spec (invalid input raises `SpecError`, exit code 2); the spec
    by the rules of the backend it runs on (``backend``, else the file's, else the default one)."""
    path = Path(path)
    resolved = load_pipeline(path, workdir_override=workdir_override)  # every check, every message
    directory = path.resolve().parent
    raw = dict(read_document(path))
    raw_workdir = workdir_override or raw.pop("workdir", None)
    raw.pop("workdir", None)
    try:
        pipeline = PipelineSpec.model_validate({**raw, "workdir": raw_workdir})
    except ValidationError as error:
        raise SpecError(problems_from_validation_error(error, PipelineSpec), str(path)) from None
    spec = pipeline.steps.train.spec
    if isinstance(spec, str):
        given = resolved.steps.train.spec  # the same file, with the pipeline's variables substituted
        spec_path = Path(resolve(given if isinstance(given, str) else spec, directory))
        load_spec(spec_path, backend=backend or resolved.backend)  # validates the spec file, naming its fields
        document = read_document(spec_path)
        spec_dir = os.path.relpath(spec_path.parent, directory)
    else:
        load_spec(resolved.steps.train.spec, base_dir=directory, backend=backend or resolved.backend)
        document, spec_dir = spec, "."
    return PipelineSource(pipeline=pipeline, resolved=resolved, spec_document=dict(document), spec_dir=spec_dir,
                          directory=directory)


def default_pipeline_dir(path: str | os.PathLike) -> str:
    """The pipeline directory as compiled into the YAML: relative to the working directory when it lies below it
    (the component image's WORKDIR holds the repository, so ``examples/digits`` works there), else absolute."""
    directory = Path(path).resolve().parent
    try:
        return directory.relative_to(Path.cwd().resolve()).as_posix() or "."
    except ValueError:
        return str(directory)


def workdir_fields(source: PipelineSource) -> tuple[str, ...]:
    """The pipeline file's step fields whose value names ``${workdir}`` (``steps.stage.source``...): paths that one
    step leaves for another in the work directory, which the tasks of a cluster share only through a volume."""
    found: list[str] = []

    def walk(value: Any, where: str) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                walk(item, f"{where}.{key}")
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(item, f"{where}[{index}]")
        elif isinstance(value, str) and "${workdir}" in value:
            found.append(where)

    walk(source.pipeline.steps.model_dump(mode="json", exclude_none=True), "steps")
    return tuple(found)


def gate_parameter(gate: Any) -> str:
    """The pipeline file's gate as the ``gate`` parameter: a gate string as it is, anything else as JSON."""
    if gate is None:
        return ""
    return gate if isinstance(gate, str) else json.dumps(gate, sort_keys=True)


def build_pipeline(source: PipelineSource, settings: ComponentSettings | None = None, *,
                   pipeline_dir: str | None = None, configure_task: Callable[[Any], Any] | None = None,
                   cluster: Any = None):
    """The KFP pipeline (a ``@dsl.pipeline`` function) for a pipeline file, with components built for ``settings``.

    ``cluster`` (`trainops.components.cluster.ClusterSettings`) is written into every task as it is created
    (`ClusterSettings.configure`: the train task's kind ``spec``, the others' ``other``), and its volume's mount path
    is the ``workdir`` parameter's default instead of the file's. ``configure_task`` is then called with every task:
    the place for cluster settings neither describes (``task.set_retry(2)``, resources, node selectors...).
    """
    from kfp import dsl

    from trainops.components.factory import build_components  # function-local (heavy): kfp, an extra

    ops = build_components(settings)
    file = source.pipeline
    steps = file.steps
    register = steps.register_step
    defaults = {
        "spec_json": source.spec_json,
        "backend": source.plan.backend,
        "backend_options": json.dumps(source.plan.backend_options, sort_keys=True),
        "workdir": (cluster.workdir if cluster is not None else None) or file.workdir or "",
        "pipeline_dir": pipeline_dir if pipeline_dir is not None else str(source.directory),
        "gate": gate_parameter(steps.evaluate.gate) if steps.evaluate else "",
        "region": file.region or "",
    }

    retries, resources = task_settings(source)

    def configured(task, kind: str = "other"):
        # Task names are the components' (train-model...), shown as they are: a display name would only make
        # kfp.local warn that it ignores it.
        task.set_caching_options(False)  # same paths may hold new data; training re-attaches by itself
        # A pod lost to the cluster is tried again; every component re-attaches to what its first try started.
        count = retries.get(kind, retries["other"])
        if count:
            task.set_retry(num_retries=count, backoff_duration="60s")
        cpu, memory = resources.get(kind, resources["other"])
        task.set_cpu_request(cpu).set_memory_request(memory)
        if cluster is not None:
            cluster.configure(task, "spec" if kind == "train" else "other")
        if configure_task is not None:
            configure_task(task)
        return task

    @dsl.pipeline(name=file.name, description=f"trainops retraining pipeline {file.name}: stage, train, evaluate, "
                                              "gate, register")
    def retrain_pipeline(spec_json: str = defaults["spec_json"], backend: str = defaults["backend"],
                         workdir: str = defaults["workdir"], pipeline_dir: str = defaults["pipeline_dir"],
                         gate: str = defaults["gate"], run_key: str = "", region: str = defaults["region"],
                         backend_options: str = defaults["backend_options"]):
        where = {"workdir": workdir, "pipeline_dir": pipeline_dir}
        previous = None
        if steps.prepare:
            previous = configured(ops.prepare(script=steps.prepare.script, args_json=json.dumps(steps.prepare.args),
                                              timeout=steps.prepare.timeout, **where))
        if steps.stage:
            stage = configured(ops.stage(source=steps.stage.source, destination=steps.stage.destination,
                                         backend=backend, s3_prefix=steps.stage.s3_prefix or "",
                                         workers=steps.stage.workers or 0, region=region,
                                         backend_options=backend_options, **where))
            if previous is not None:
                stage.after(previous)
            previous = stage
        spec_inputs = {"spec_json": spec_json, "spec_dir": source.spec_dir, "backend": backend, "region": region,
                       "backend_options": backend_options}
        train = configured(ops.train(channels_json=json.dumps(steps.train.channels, sort_keys=True),
                                     job_name=steps.train.job_name or "", name_base=file.name, run_key=run_key,
                                     processes_per_host=steps.train.processes_per_host or 0,
                                     retries_json=json.dumps(steps.train.retries, sort_keys=True),
                                     **spec_inputs, **where), "train")
        if previous is not None:
            train.after(previous)
        model = train.outputs["model"]
        if steps.evaluate:
            evaluate = configured(ops.evaluate(
                model=model, evaluate_json=json.dumps(evaluate_settings(steps.evaluate), sort_keys=True), gate=gate,
                champion_group=register.group if register else "",
                registry_dir=(register.registry_dir or "") if register else "", **spec_inputs, **where))
            passed = evaluate.outputs["Output"]
            if steps.evaluate.on_gate_failure == "fail":
                with dsl.If(passed == False, name="gate-failed"):  # noqa: E712 - a KFP condition, not a Python test
                    configured(ops.gate_failed(report=evaluate.outputs["report"]), "verdict")
            if register:
                with dsl.If(passed == True, name="gate-passed"):  # noqa: E712 - a KFP condition, not a Python test
                    register_task(ops, register, model, evaluate.outputs["metrics"], spec_inputs, where, configured)
        elif register:
            register_task(ops, register, model, None, spec_inputs, where, configured)

    return retrain_pipeline


#: Pod retries of a task, as the Airflow operators' default (twice, a minute apart): a retry re-attaches.
DEFAULT_POD_RETRIES = 2


def task_settings(source: PipelineSource) -> tuple[dict[str, int], dict[str, tuple[str, str]]]:
    """(retries, (cpu, memory) requests) by task kind, from the pipeline file and its job spec.

    The train task's pod retries are its infrastructure budget (the file's ``steps.train.retries``); the gate-failed
    task, whose failure is the verdict, has none; on a backend that runs jobs in the caller's process (capability
    ``run_here``: the local backend's emulated hosts) its pod runs every host, so it asks for a CPU per rank and
    2 GiB per host; elsewhere (SageMaker) it only submits and waits. The other components ask for little (one CPU,
    1 GiB)."""
    steps = source.pipeline.steps
    budget = int((steps.train.retries or {}).get("infrastructure", DEFAULT_POD_RETRIES))
    # The gate-failed task fails on purpose: trying it again (a minute, then two, apart) only delays the verdict.
    retries = {"train": budget, "verdict": 0, "other": DEFAULT_POD_RETRIES}
    small = ("1", "1Gi")

    if backend_class(source.plan.backend).RUNS_HERE:  # the pod itself runs the job's hosts
        hosts = int(source.spec_document.get("instance_count") or 1)
        ranks = hosts * int(steps.train.processes_per_host or 1)
        resources = {"train": (str(ranks), f"{2 * hosts}Gi"), "other": small}
    else:
        resources = {"train": ("500m", "512Mi"), "other": small}
    return retries, resources


def evaluate_settings(step) -> dict[str, Any]:
    """The evaluate component's settings from the pipeline file's evaluate step (the gate is a parameter)."""
    return {"entry_point": step.entry_point, "source_dir": step.source_dir, "channels": step.channels,
            "hyperparameters": step.hyperparameters, "timeout": step.timeout}


def register_task(ops, register, model, metrics, spec_inputs: dict, where: dict, configured):
    """The register task of the pipeline (with the evaluation's Metrics artifact)."""
    evaluation = {"metrics": metrics} if metrics is not None else {}
    return configured(ops.register(model=model, group=register.group, approval=register.approval,
                                   registry_dir=register.registry_dir or "", description=register.description or "",
                                   **evaluation, **spec_inputs, **where))


def image_files(source: PipelineSource) -> list[tuple[str, Path]]:
    """(field, local path) of every file or directory the components read from the pipeline's own files: the prepare
    script, the job spec file, the training code and the evaluation code (URIs such as ``s3://`` are not files)."""
    steps, here = source.resolved.steps, source.directory
    files: list[tuple[str, Path]] = []
    if steps.prepare:
        files.append(("steps.prepare.script", Path(resolve(steps.prepare.script, here))))
    if isinstance(steps.train.spec, str):
        spec_path = Path(resolve(steps.train.spec, here))
        files.append(("steps.train.spec", spec_path))
        spec = load_spec(spec_path, backend=source.resolved.backend)
    else:
        spec = load_spec(steps.train.spec, base_dir=here, backend=source.resolved.backend)
    if spec.source_dir and "://" not in spec.source_dir:
        files.append(("steps.train.spec.source_dir", Path(spec.source_dir)))
        if spec.entry_point:  # a v3 command names no file
            files.append(("steps.train.spec.entry_point", Path(spec.source_dir) / spec.entry_point))
    if steps.evaluate and "://" not in (steps.evaluate.source_dir or ""):
        code = Path(resolve(steps.evaluate.source_dir or ".", here))
        files.append(("steps.evaluate.source_dir", code))
        files.append(("steps.evaluate.entry_point", code / steps.evaluate.entry_point))
    return files


def check_placeholders(document: Any, where: str, path: str = "") -> None:
    """Refuse, at compile time, a value or a mapping key of the pipeline file holding a KFP placeholder (``{{$`` or
    the DSL's ``{{channel:``): KFP would turn it into a run-time value (another parameter, a task's output) inside
    the component's input, so the step would read something other than the file says. Refused rather than kept
    literal: these values travel as KFP parameters, where KFP reads every string. The job spec travels encoded
    (`encode_parameter`: its values stay literal) and is not checked (its inline form is skipped)."""
    problems = []

    def refuse(at: str, form: str, what: str) -> None:
        problems.append(Problem(at, f"{what} a KFP placeholder ({form}...): KFP would replace it with a run-time "
                                    "value before the component reads it; write it without the placeholder"))

    def walk(value: Any, at: str) -> None:
        if at == "steps.train.spec" and isinstance(value, dict):
            return  # encoded in spec_json
        if isinstance(value, str) and placeholder_in(value):
            refuse(at, str(placeholder_in(value)), "holds")
        elif isinstance(value, dict):
            for key, item in value.items():
                if placeholder_in(str(key)):
                    refuse(f"{at}.{key}" if at else str(key), str(placeholder_in(str(key))), "is a key holding")
                walk(item, f"{at}.{key}" if at else str(key))
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(item, f"{at}[{index}]")

    walk(document, path)
    if problems:
        raise SpecError(problems, where)


def check_secret_values(source: PipelineSource, where: str) -> None:
    """Refuse, at compile time, a value or key of the pipeline file holding the value of one of the job spec's
    secret environment variables (`trainops.spec.secrets`): those values are written into the YAML as they are, and
    the YAML is read by anyone who can see the pipeline. The job spec itself travels masked (`spec_json`)."""
    environment = source.spec_document.get("environment")
    if not isinstance(environment, dict):
        return
    problems = []

    def walk(value: Any, at: str) -> None:
        if at == "steps.train.spec" and isinstance(value, dict):
            return  # masked in spec_json
        if isinstance(value, str) and secret_held_by(value, environment):
            problems.append(Problem(at, f"holds the value of the job spec's secret environment variable "
                                        f"{secret_held_by(value, environment)}; the compiled pipeline is read by "
                                        "anyone who can see it: read the value from the environment instead"))
        elif isinstance(value, dict):
            for key, item in value.items():
                walk(str(key), f"{at}.{key}[key]" if at else f"{key}[key]")
                walk(item, f"{at}.{key}" if at else str(key))
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(item, f"{at}[{index}]")

    walk(source.pipeline.model_dump(mode="json"), "")
    if problems:
        raise SpecError(problems, where)


def check_image_paths(source: PipelineSource, pipeline_dir: str, context: Path, where: str) -> None:
    """Refuse, at compile time, a pipeline whose components would not find its files in the image.

    The image built from the Dockerfile holds its build context's pipeline directory (``examples/`` and the
    ``PIPELINE_DIR`` build argument) under `IMAGE_WORKDIR`, its working directory. So ``pipeline_dir`` must name the
    pipeline file's directory as seen from ``context`` (the build context, the current directory by default):
    relative to it, or absolute under `IMAGE_WORKDIR`; and every file the components read must exist and lie in
    that directory (it is what travels). Raises `SpecError` naming each problem's field.
    """
    from pathlib import PurePosixPath


    here = source.directory
    given = PurePosixPath(pipeline_dir)
    workdir = PurePosixPath(IMAGE_WORKDIR)
    how = (f"compile from the image's build context (the directory `docker build` is run in; the pipeline "
           f"directory must lie below it) or give --pipeline-dir as the directory in the image (relative to its "
           f"WORKDIR {IMAGE_WORKDIR}, or absolute under it)")
    if given.is_absolute() and given != workdir and workdir not in given.parents:
        raise SpecError(Problem("pipeline_dir", f"{pipeline_dir} is not in the image (its files lie under "
                                                f"{IMAGE_WORKDIR}): {how}"), where)
    relative = given.relative_to(workdir) if given.is_absolute() else given
    if ".." in relative.parts or not (context / relative).resolve() == here:
        raise SpecError(Problem("pipeline_dir", f"{pipeline_dir} is not the pipeline file's directory in the image: "
                                                f"from {context} it leads to {(context / relative).resolve()}, the "
                                                f"file lies in {here}; {how}"), where)
    problems = []
    for field, path in image_files(source):
        if not path.exists():
            problems.append(Problem(field, f"{path} does not exist"))
        elif path.resolve() != here and here not in path.resolve().parents:
            problems.append(Problem(field, f"{path} is outside the pipeline directory {here}, which is what the "
                                           "image holds: move it into that directory"))
    if problems:
        raise SpecError(problems, where)


def compile_pipeline(path: str | os.PathLike, output: str | os.PathLike, *,
                     settings: ComponentSettings | None = None, pipeline_dir: str | None = None,
                     configure_task: Callable[[Any], Any] | None = None, context: str | os.PathLike | None = None,
                     cluster: Any = None) -> str:
    """Compile the pipeline of a pipeline file to KFP IR YAML at ``output``; return the output path.

    ``context`` is the image's build context (default: the current directory); a pipeline whose files the
    components would not find in the image is refused before anything is written (`check_image_paths`), and so are
    lightweight components that could not run it (`check_lightweight`). ``cluster``
    (`trainops.components.cluster.ClusterSettings`, what ``trainops kfp compile`` always gives): the work
    directory's volume, the Secrets of masked values, the image pull policy, written into every task; a pipeline
    that would not run on a cluster as compiled is refused (`check_cluster`).
    """
    from kfp import compiler


    source = read_pipeline_source(path)
    check_placeholders(source.pipeline.model_dump(mode="json"), str(path))
    check_secret_values(source, str(path))
    pipeline_dir = pipeline_dir or default_pipeline_dir(path)
    check_image_paths(source, pipeline_dir, Path(context or Path.cwd()).resolve(), str(path))
    if settings is not None:
        check_lightweight(settings, source.plan.backend, str(path))
    if cluster is not None:
        check_cluster(cluster, source.plan.backend, source.secrets, str(path), workdir_fields(source))
    pipeline = build_pipeline(source, settings, pipeline_dir=pipeline_dir, configure_task=configure_task,
                              cluster=cluster)
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    compiler.Compiler().compile(pipeline, str(output))
    return str(output)
