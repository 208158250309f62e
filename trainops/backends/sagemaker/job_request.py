"""A SageMaker job's region and its checked request, as the backend's dry run and submission decide them.

The region is the spec's, else the backend's (``-o region`` / ``--region``), else that of the clients it was given
(an Airflow connection's), else boto3's configuration (`trainops.aws.clients.resolve_region`). A spec whose region
is not the one of clients given to the backend is refused: the job would be created in one region with an image of
another. The request is `trainops.backends.request.code.checked_render`'s: render's, with the code the upload will read
from this machine (source_dir, the entry point in it, the dependencies) checked at the same time.
"""

from __future__ import annotations

import os
from typing import Any

from trainops.aws.clients import ClientFactory
from trainops.errors import Problem, SpecError


def default_region(spec: Any = None, region: str | None = None) -> str | None:
    """The spec's region, else the given one, else the environment's (``AWS_REGION``, ``AWS_DEFAULT_REGION``)."""
    return (getattr(spec, "region", None) or region or os.environ.get("AWS_REGION")
            or os.environ.get("AWS_DEFAULT_REGION"))


def given_clients_region(wanted: str | None, bound: str | None, factory: ClientFactory) -> str | None:
    """The region of a job whose spec says ``wanted``, on a backend bound to ``bound`` or, failing that, to the
    region of the clients ``factory`` makes; a spec for another region than theirs is a `SpecError`."""
    bound = bound or _factory_region(factory)
    if wanted and bound and wanted != bound:
        raise SpecError(Problem("region", f"the spec's region is {wanted} but the AWS clients given (the Airflow "
                                          f"connection's) are for {bound}: set the connection's region_name, or "
                                          "remove region from the spec"))
    return wanted or bound


def _factory_region(factory: ClientFactory) -> str | None:
    region = getattr(getattr(factory("sagemaker"), "meta", None), "region_name", None)
    return region if isinstance(region, str) else None
