"""Kubeflow Pipelines v2 components for the trainops steps, and the retraining pipeline built from a pipeline file.

- `build_components(settings)`: one lightweight Python component per step (prepare, stage, train, evaluate,
  register, gate-failed), for an image and packages of your choice (`ComponentSettings`).
- `retrain_pipeline(pipeline_file)`: the KFP pipeline of a pipeline file (the digits example by default):
  stage -> train -> evaluate -> ``dsl.If`` on the gate -> register.
- `compile_pipeline(pipeline_file, output)`: the same, compiled to KFP IR YAML (``trainops kfp compile``);
  `trainops.components.local_run.run_local` runs it with kfp.local (``trainops kfp run-local``).

The component functions hand their inputs to `trainops.components.*_task`, which call the typed steps
(`trainops.steps`), so Airflow, KFP and ``trainops run`` share one implementation. kfp is imported only inside this
package; the names above are loaded on first use, so ``import trainops.components.train_task`` (what runs in a
component) does not pay for kfp's compiler.

Function-local imports (CLI start, cycle): `trainops --help` imports this package (the kfp commands' options); the
pipeline module, which imports kfp and this package, loads on first use.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["ComponentSettings", "LOCAL_SETTINGS", "build_components", "compile_pipeline", "retrain_pipeline",
           "DIGITS_PIPELINE"]

#: The digits example's pipeline file (present in a source checkout and in the image built from the Dockerfile).
DIGITS_PIPELINE = Path(__file__).resolve().parents[2] / "examples" / "digits" / "pipeline.yaml"


def retrain_pipeline(pipeline_file: str | Path = DIGITS_PIPELINE, settings: Any = None,
                     pipeline_dir: str | None = None, configure_task: Any = None):
    """The KFP pipeline of a pipeline file (default: the digits example), with components built for ``settings``
    (default `ComponentSettings()`); ``pipeline_dir`` is the file's directory as the components will see it;
    ``configure_task`` is called with every task (retries, resources, volumes)."""
    from trainops.components.pipeline import build_pipeline, read_pipeline_source

    return build_pipeline(read_pipeline_source(pipeline_file), settings, pipeline_dir=pipeline_dir,
                          configure_task=configure_task)


def __getattr__(name: str) -> Any:
    if name in ("ComponentSettings", "LOCAL_SETTINGS"):
        from trainops.components import settings

        return getattr(settings, name)
    if name == "build_components":
        from trainops.components.factory import build_components

        return build_components
    if name == "compile_pipeline":
        from trainops.components.pipeline import compile_pipeline

        return compile_pipeline
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
