"""What the register and gate-failed components do inside their containers.

Register records the model that passed the gate through the typed register step (local registry or the SageMaker
Model Registry). Gate-failed runs on the other branch of the gate when the pipeline file says a failed gate fails the
pipeline (``on_gate_failure: fail``, the default), so the run ends Failed with the gate's message, as
`trainops run` does.
"""

from __future__ import annotations

from typing import Any

from trainops.backends.api import get_backend
from trainops.components.paths import backend_options as parse_options
from trainops.components.paths import places
from trainops.components.train_task import load_component_spec, model_location
from trainops.steps.gate import GateFailed
from trainops.steps.plan import step_settings
from trainops.steps.register import register


def run_register(*, model: Any, metrics: Any, spec_json: str, spec_dir: str, backend: str, workdir: str,
                 pipeline_dir: str, group: str, approval: str, registry_dir: str, description: str,
                 region: str, backend_options: str = "") -> tuple[int, str, str]:
    """Register the model with the metrics the evaluation logged; return (version, approval status, location)."""
    where = places(pipeline_dir, workdir)
    spec = load_component_spec(spec_json, spec_dir, where, backend=backend or None)

    given = parse_options(backend_options)
    chosen = get_backend(backend or None, options=given, source="backend_options", workdir=str(where.workdir))
    _, settings = step_settings(chosen, spec, spec.region or region or None)
    options: dict[str, Any] = {
        "registry_dir": where.path(registry_dir, "registry_dir") if registry_dir else str(where.workdir / "registry"),
        **settings,
    }
    logged = dict(metrics.metadata or {}) if metrics is not None else {}
    entry = register(model_artifact=model_location(model), metrics=logged, group=group, spec=spec.to_json_dict(),
                     approval=approval, backend=backend or None, backend_options=given,
                     job_name=(model.metadata or {}).get("job_name"),
                     description="; ".join(filter(None, [description, (model.metadata or {}).get("cost_note")])),
                     **options)
    print(f"[register] {group} version {entry['version']} ({entry['approval_status']}): {entry['location']}",
          flush=True)
    return int(entry["version"] or 0), str(entry["approval_status"]), str(entry["location"])


def fail_gate(report: Any) -> None:
    """Fail the task with the gate's message from the evaluation report's metadata (`GateFailed`, exit code 1)."""
    message = (report.metadata or {}).get("message") or "the gate failed"
    raise GateFailed(f"the model did not pass its quality gate: {message}; it was not registered")
