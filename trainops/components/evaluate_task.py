"""What the evaluate component does inside its container: the typed evaluate step, then KFP metrics and a report.

Every metric of ``metrics.json`` goes to the ``Output[Metrics]`` artifact (the KFP UI compares them across runs); the
``Output[HTML]`` report embeds the loss curve and the script's report, and its metadata carries the gate's verdict
and message; the verdict is also the component's one output, a boolean the pipeline branches on (``dsl.If``), so a
failed gate is a result here, not a failed task. (One output rather than several: kfp.local resolves a condition
on a task's single ``Output`` but not on a named output of a multi-output task.)
"""

from __future__ import annotations

import json
from typing import Any

from trainops.backends.api import get_backend
from trainops.components.paths import Places, parse_json, places
from trainops.components.paths import backend_options as parse_options
from trainops.components.train_task import load_component_spec, model_location
from trainops.errors import Problem, SpecError
from trainops.steps.evaluate import evaluate
from trainops.steps.plan import step_settings
from trainops.steps.report import write_report

EVALUATE_KEYS = frozenset({"entry_point", "source_dir", "channels", "hyperparameters", "timeout"})


def parse_gate(text: str) -> Any:
    """A gate parameter: empty (no gate), a JSON document (a mapping or a list of gates) or one gate string such as
    ``accuracy >= 0.95``."""
    text = (text or "").strip()
    if not text:
        return None
    if text[0] in "[{":
        return parse_json(text, "gate", (dict, list))
    return text


def _backend_options(backend: str, spec_json: str, spec_dir: str, where: Places, artifact: str, job_name: str,
                     region: str, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
    """The output directory and the backend's own arguments of the evaluate step, as every front end derives them
    (`trainops.steps.plan.step_settings`: on SageMaker the training job's role and image evaluate its model)."""
    def spec():  # read only by a backend whose settings come from it (SageMaker)
        return load_component_spec(spec_json, spec_dir, where, backend=backend or None)

    chosen = get_backend(backend or None, options=options, source="backend_options", workdir=str(where.workdir))
    settings, _ = step_settings(chosen, spec, region or None)
    # On SageMaker beside the model (``.../<job>/evaluation``), locally keyed by the job.
    output_dir = chosen.evaluation_output(str(where.workdir), job_name, artifact)
    return output_dir, settings


def run_evaluate(*, model: Any, spec_json: str, spec_dir: str, backend: str, workdir: str, pipeline_dir: str,
                 evaluate_json: str, gate: str, champion_group: str, registry_dir: str, region: str,
                 metrics: Any, report: Any, backend_options: str = "") -> bool:
    """Evaluate the model with the typed step; fill in the Metrics and HTML artifacts; return whether the model
    passed its gate."""
    where = places(pipeline_dir, workdir)
    settings = parse_options(backend_options)
    config = parse_json(evaluate_json, "evaluate_json", dict) or {}
    unknown = sorted(set(config) - EVALUATE_KEYS)
    if unknown or "entry_point" not in config:
        raise SpecError([Problem(key, "is not a setting of the evaluate component") for key in unknown]
                        or [Problem("entry_point", "is required")], source="evaluate_json")
    artifact = model_location(model)
    job_name = str((model.metadata or {}).get("job_name") or "model")
    output_dir, options = _backend_options(backend, spec_json, spec_dir, where, artifact, job_name, region,
                                           settings)
    if champion_group:
        registry = where.path(registry_dir, "registry_dir") if registry_dir else str(where.workdir / "registry")
        options.update(champion_group=champion_group, registry_dir=registry)
    else:
        options["champion"] = None  # no registry group: a champion gate has nothing to compare with, and passes
    channels = {name: where.path(str(path), f"channels.{name}")
                for name, path in (config.get("channels") or {}).items()}
    result = evaluate(
        entry_point=config["entry_point"],
        source_dir=where.path(config.get("source_dir") or ".", "source_dir"),
        model_artifact=artifact,
        channels=channels,
        output_dir=output_dir,
        gate=parse_gate(gate),
        backend=backend or None,
        backend_options=settings,
        hyperparameters=config.get("hyperparameters") or {},
        timeout=config.get("timeout"),
        **options,
    )
    data = result.to_dict()
    for name, value in sorted(data["metrics"].items()):
        metrics.log_metric(name, value)
    message = data["message"] or "no gate"
    report.metadata.update({"passed": bool(data["passed"]), "message": message, "job_name": job_name,
                            "output_dir": data["output_dir"]})
    if not report.uri.endswith(".html"):
        report.uri += ".html"  # the page is known by its name: the UI's download and a browser open it as HTML
    write_report(report.path, data, title=f"Evaluation of {job_name}")
    print(f"[evaluate] {json.dumps(data['metrics'], sort_keys=True)}; {message}", flush=True)
    return bool(data["passed"])
