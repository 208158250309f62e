"""The stage step: put training data where the training job reads it, and return a JSON-able report.

Used alike by the pipeline runner, the Airflow operator and the KFP component, so all three stage the same way:

- ``backend="local"``: copy a local directory, ``file://`` URI or ``s3://`` prefix into a local directory that stands
  for the FSx mount (`trainops.backends.hostfs.staging.stage_tree`). Options: ``workers``, ``progress``, ``delete``,
  ``client_factory``.
- ``backend="sagemaker"``: make an S3 prefix visible on an FSx for Lustre file system
  (`trainops.backends.sagemaker.fsx.stage`: a data repository association and an import task). The destination is
  spelled ``fsx://fs-0123456789abcdef0/path/in/filesystem``; the source is the S3 prefix (``s3://bucket/prefix``),
  also accepted as the ``s3_prefix`` option. Options: ``s3_prefix``, ``client_factory``, ``region``, ``profile``,
  ``paths``, ``report_uri``, ``poll_seconds``, ``timeout_seconds``; ``workers`` is accepted and unused (the import
  runs inside FSx).

With ``strict=True`` (the default) a stage that refused or failed any file raises `JobFailed` after it finishes,
so hostile or broken input can never pass a pipeline silently. Unknown options raise `SpecError` naming them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from trainops.aws.clients import default_client_factory
from trainops.backends.api import get_backend
from trainops.backends.job_kinds import StageRequest, Staging, needed
from trainops.errors import Problem, SpecError

if TYPE_CHECKING:
    from trainops.backends.api import Backend

#: Backend settings (`get_backend`'s context) the stage step accepts besides each backend's own staging options.
CONTEXT_OPTIONS = frozenset({"client_factory", "region", "profile"})

def stage(source: str, destination: str, *, backend: str | Backend | None = None,
          backend_options: Mapping[str, Any] | None = None, **options: Any) -> dict[str, Any]:
    """Stage ``source`` into ``destination`` with ``backend`` and return the report (the seam's
    `trainops.backends.api.StageReport`) as a JSON-able dict.

    Local: the local report's ``to_dict`` (``files_copied``, ``bytes_copied``,
    ``files_skipped``, ``refused``, ``failed``, ``stale``, ``seconds``, ``megabytes_per_second``, ...).
    SageMaker: `trainops.backends.sagemaker.fsx.StagingReport.to_dict` (``directory_path`` is what a training
    channel's ``FileSystemDataSource.DirectoryPath`` should be).

    ``backend`` (None: the default) and ``backend_options`` (the one mapping of its settings) choose the backend
    as every step does (`trainops.backends.get_backend`: a backend already opened refuses settings given beside it,
    naming them); ``options`` are its staging options.

    Raises `SpecError` for bad input (unknown backend or option, malformed source or destination) and `JobFailed`
    when staging fails, or (``strict``, the default) when any file was refused or failed.
    """
    context = {key: options.pop(key) for key in CONTEXT_OPTIONS if key in options}
    profile = context.pop("profile", None)
    if profile and context.get("client_factory") is None:
        context["client_factory"] = default_client_factory(context.get("region"), profile)
    chosen = get_backend(backend, options=backend_options, **context)  # an opened one refuses options beside it
    allowed = stage_options(chosen)
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise SpecError([Problem(name, f"is not an option of the {chosen.name} stage step; use one of "
                                       f"{', '.join(sorted(allowed | CONTEXT_OPTIONS))}") for name in unknown])
    staging = needed(chosen.staging(), chosen, "staging")
    report: dict[str, Any] = staging.run(StageRequest(source, destination, options)).to_dict()
    return report


def stage_options(backend: Any) -> frozenset[str]:
    """The options a backend's staging takes beside the source and destination (`Staging.SETTINGS`); refused,
    naming the backend, when it does not stage."""
    staging: Staging = needed(backend.staging(), backend, "staging")
    return staging.SETTINGS
