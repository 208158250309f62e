"""What moto 5.2 lacks for the capacity preflight, added to the in-process moto server (as moto_server.py does for
FSx), so the preflight's arithmetic runs against moto's own SageMaker jobs.

- Service Quotas: moto answers only ``vpc`` (``GetServiceQuota``, ``ListAWSDefaultServiceQuotas``) and has no
  ``ListServiceQuotas`` at all. `patch_sagemaker_quotas` adds ``ListServiceQuotas`` and ``GetServiceQuota`` for
  ``sagemaker``, answering from `QUOTAS` (quota name -> value), which a test sets through `set_quota`.
- Training jobs: moto creates every job ``Completed``; `set_training_job_status` makes one ``InProgress``.

``DescribeTrainingPlan`` is not in moto at all: the training-plan checks are tested with botocore's Stubber.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from support.moto_server import ACCOUNT_ID, REGION

QUOTAS: dict[str, float] = {}


def code_for(name: str) -> str:
    """A stable quota code for a quota name (AWS's are opaque L-XXXXXXXX codes too)."""
    return "L-" + hashlib.sha256(name.encode()).hexdigest()[:8].upper()


def _quota(name: str, value: float) -> dict[str, Any]:
    code = code_for(name)
    return {"ServiceCode": "sagemaker", "ServiceName": "Amazon SageMaker", "QuotaCode": code, "QuotaName": name,
            "QuotaArn": f"arn:aws:servicequotas:{REGION}:{ACCOUNT_ID}:sagemaker/{code}", "Value": value,
            "Unit": "None", "Adjustable": True, "GlobalQuota": False}


def set_quota(name: str, value: float) -> None:
    QUOTAS[name] = value


def patch_sagemaker_quotas() -> Any:
    """Teach moto's service-quotas SageMaker's quotas; return a function that undoes it."""
    from moto.servicequotas.exceptions import NoSuchResource
    from moto.servicequotas.models import ServiceQuotasBackend
    from moto.servicequotas.responses import ServiceQuotasResponse

    original_get = ServiceQuotasBackend.get_service_quota

    def list_service_quotas(self: Any) -> str:
        params = json.loads(self.body)
        if params.get("ServiceCode") != "sagemaker":
            raise NoSuchResource
        return json.dumps({"Quotas": [_quota(name, value) for name, value in sorted(QUOTAS.items())]})

    def get_service_quota(self: Any, service_code: str, quota_code: str) -> dict[str, Any]:
        if service_code != "sagemaker":
            return original_get(self, service_code, quota_code)
        for name, value in QUOTAS.items():
            if code_for(name) == quota_code:
                return _quota(name, value)
        raise NoSuchResource

    ServiceQuotasResponse.list_service_quotas = list_service_quotas
    ServiceQuotasBackend.get_service_quota = get_service_quota

    def undo() -> None:
        del ServiceQuotasResponse.list_service_quotas
        ServiceQuotasBackend.get_service_quota = original_get
        QUOTAS.clear()

    return undo


def set_training_job_status(name: str, status: str) -> None:
    """Change the status moto reports for one training job."""
    from moto.sagemaker.models import sagemaker_backends

    sagemaker_backends[ACCOUNT_ID][REGION].training_jobs[name].training_job_status = status
