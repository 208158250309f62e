"""Run by the HyperPod oracle venv's interpreter (`k8s_hyperpod_venv`), never by trainops' venv: reads rendered
HyperPodPyTorchJobs (a JSON list on stdin) and prints (a JSON list, in order) for each the object SageMaker
HyperPod's SDK (``sagemaker-hyperpod`` 3.12.0) would send the API server for it (``{"sent": ...}``), or why the SDK
refused it (``{"error": ...}``). One process for all: the SDK takes seconds to import.

It reads the object as the SDK reads one from the API server (its ``spec`` through the published model, by the
fields' API names; the metadata through its Metadata model), builds the SDK's own ``HyperPodPytorchJob`` from them,
then writes the body as ``HyperPodPytorchJob.create`` does (without calling a cluster, and without its quota
allocation, which fills in CPU and memory requests from its instance table). A field the models do not have, or a
value of the wrong type, is refused (pydantic's message); a field the top-level model ignores is missing from
the answer, so the caller compares the answer with what it rendered.
"""

import json
import sys


def main() -> int:
    from sagemaker.hyperpod.common.config.metadata import Metadata
    from sagemaker.hyperpod.training.config.hyperpod_pytorch_job_unified_config import _HyperPodPytorchJob
    from sagemaker.hyperpod.training.hyperpod_pytorch_job import API_VERSION, KIND, TRAINING_GROUP, HyperPodPytorchJob

    answers = []
    for rendered in json.load(sys.stdin):
        try:
            spec = _HyperPodPytorchJob.model_validate(rendered["spec"], by_name=True)
            job = HyperPodPytorchJob(metadata=Metadata(**rendered["metadata"]),
                                     **spec.model_dump(by_alias=True, exclude_none=True))
            # As create() builds its body (its quota allocation and API call aside).
            sent = _HyperPodPytorchJob(**job.model_dump(by_alias=True, exclude_none=True))
        except Exception as error:  # noqa: BLE001 - the caller shows the SDK's own message
            answers.append({"error": f"{type(error).__name__}: {error}"})
            continue
        answers.append({"sent": {"apiVersion": f"{TRAINING_GROUP}/{API_VERSION}", "kind": KIND,
                                 "metadata": job.metadata.model_dump(exclude_none=True),
                                 "spec": sent.model_dump(exclude_none=True)}})
    json.dump(answers, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
