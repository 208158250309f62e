"""A job's options on the kubernetes backend (`KubernetesOptions`), checked when they are given.

Where the cluster is belongs to the backend (`settings.KubernetesCluster`); these are the job's: which kind of
object it becomes, the image its pods run, where Kueue queues it and how the scheduler places its pods.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from trainops.backends.kit import BackendOptions, Problem, SpecError
from trainops.backends.options import front_end_option_problems

FLAVOURS = ("trainer", "hyperpod")
DEFAULT_RUNTIME = "torch-distributed"
#: HyperPod's in-place restarts of a job by default: as many as trainops' own infrastructure retry budget
#: (`trainops.spec.retries.RetryBudgets.infrastructure`).
DEFAULT_MAX_RETRY = 3
#: The fields of a toleration (a Kubernetes ``core/v1`` Toleration), as the API spells them.
TOLERATION_FIELDS = frozenset({"key", "operator", "value", "effect", "tolerationSeconds"})
_OPERATORS = ("Exists", "Equal")
_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
# A label key: an optional DNS-subdomain prefix and '/', then a name of at most 63 characters.
_LABEL_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?\Z")


@dataclass(frozen=True)
class KubernetesOptions(BackendOptions):
    """Options of a job on the kubernetes backend.

    Args:
        flavour: ``trainer`` (a Kubeflow Trainer TrainJob: default) or ``hyperpod`` (SageMaker HyperPod's
            HyperPodPyTorchJob on EKS).
        runtime: the ClusterTrainingRuntime the TrainJob names (default ``torch-distributed``).
        image: the image every pod runs (default: the spec's ``image_uri``); it needs Python, not trainops.
        queue: the Kueue LocalQueue (the ``kueue.x-k8s.io/queue-name`` label).
        priority_class: the pods' PriorityClass (Kueue's ``kueue.x-k8s.io/priority-class`` label too).
        service_account: the service account the pods run as.
        node_selector: label -> value every node of the job must carry.
        tolerations: the taints the pods tolerate (each a Kubernetes Toleration: key, operator, value, effect).
        processes_per_host: ranks per node (default: the distribution's, else the GPUs or Neuron cores, else one).
        channel_overrides: channel name -> a directory on the shared volume the pods read it from (a pipeline's
            staged data).
        checkpoint_key: the checkpoint directory's key under ``<shared_dir>/checkpoints`` (the train step gives its
            job's name, so its attempts ``<name>-N`` resume; default: the spec's checkpoint_s3_uri, else the job's
            name).
        max_retry: hyperpod flavour: how often HyperPod's training operator restarts the job in place after a fault
            (``runPolicy.jobMaxRetryCount``; default `DEFAULT_MAX_RETRY`, trainops' own infrastructure budget),
            each restart resuming from the checkpoints, before the job fails and trainops' retries take over.
    """

    backend: ClassVar[str] = "kubernetes"

    flavour: str | None = None
    runtime: str | None = None
    image: str | None = None
    queue: str | None = None
    priority_class: str | None = None
    service_account: str | None = None
    node_selector: Mapping[str, str] | None = None
    tolerations: Sequence[Mapping[str, Any]] | None = None
    processes_per_host: int | None = None
    channel_overrides: Mapping[str, str] | None = None
    checkpoint_key: str | None = None
    max_retry: int | None = None

    def __post_init__(self) -> None:
        problems: list[Problem] = []
        if self.flavour is not None and self.flavour not in FLAVOURS:
            problems.append(Problem("flavour", f"{self.flavour!r} is not a flavour; use one of "
                                               f"{', '.join(FLAVOURS)}"))
        for name in ("runtime", "queue", "priority_class", "service_account"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, str) and len(value) <= 253 and _NAME.match(value)):
                problems.append(Problem(name, f"{value!r} is not a Kubernetes object name (lower-case letters, "
                                              "digits, '-' and '.')"))
        if self.image is not None and (not isinstance(self.image, str) or not self.image.strip()
                                       or any(character.isspace() for character in self.image)):
            problems.append(Problem("image", f"{self.image!r} is not an image reference"))
        if self.max_retry is not None and (isinstance(self.max_retry, bool) or not isinstance(self.max_retry, int)
                                           or not 0 <= self.max_retry <= 100):
            problems.append(Problem("max_retry", f"{self.max_retry!r} is not a whole number from 0 to 100"))
        if self.max_retry is not None and (self.flavour or "trainer") != "hyperpod":
            problems.append(Problem("max_retry", "is an option of the hyperpod flavour (HyperPod's in-place restarts);"
                                                 " a TrainJob is retried by trainops (--retries)"))
        if self.processes_per_host is not None and (isinstance(self.processes_per_host, bool)
                                                    or not isinstance(self.processes_per_host, int)
                                                    or not 1 <= self.processes_per_host <= 1024):
            problems.append(Problem("processes_per_host", f"{self.processes_per_host!r} is not a whole number "
                                                          "from 1 to 1024"))
        problems += front_end_option_problems(self.channel_overrides, self.checkpoint_key,
                                              directory="absolute directory on the shared volume",
                                              is_directory=os.path.isabs)
        problems.extend(_node_selector_problems(self.node_selector))
        problems.extend(_toleration_problems(self.tolerations))
        if problems:
            raise SpecError(problems, "kubernetes job options")


def _node_selector_problems(selector: Any) -> list[Problem]:
    if selector is None:
        return []
    if not isinstance(selector, Mapping):
        return [Problem("node_selector", f"{selector!r} is not a mapping of node label to value")]
    problems = []
    for key, value in selector.items():
        prefix, _, name = str(key).rpartition("/")
        if (not isinstance(key, str) or not name or len(name) > 63 or not _LABEL_NAME.match(name)
                or (prefix and not _NAME.match(prefix))):
            problems.append(Problem(f"node_selector.{key}", "is not a label key"))
        elif not isinstance(value, str) or len(value) > 63 or not _LABEL_NAME.match(value):
            problems.append(Problem(f"node_selector.{key}", f"{value!r} is not a label value (at most 63 "
                                                            "letters, digits, '-', '_' and '.')"))
    return problems


def _toleration_problems(tolerations: Any) -> list[Problem]:
    if tolerations is None:
        return []
    if isinstance(tolerations, (str, bytes, Mapping)) or not isinstance(tolerations, Sequence):
        return [Problem("tolerations", "is not a list of tolerations (each {key, operator, value, effect})")]
    problems = []
    for index, toleration in enumerate(tolerations):
        field = f"tolerations[{index}]"
        if not isinstance(toleration, Mapping):
            problems.append(Problem(field, f"{toleration!r} is not a toleration (a mapping)"))
            continue
        unknown = sorted(set(toleration) - TOLERATION_FIELDS)
        if unknown:
            problems.append(Problem(field, f"{', '.join(unknown)} is not a field of a toleration; use "
                                           f"{', '.join(sorted(TOLERATION_FIELDS))}"))
        if toleration.get("operator", "Equal") not in _OPERATORS:
            problems.append(Problem(f"{field}.operator", f"{toleration.get('operator')!r} is not one of "
                                                         f"{', '.join(_OPERATORS)}"))
        if toleration.get("effect") not in (None, *_EFFECTS):
            problems.append(Problem(f"{field}.effect", f"{toleration.get('effect')!r} is not one of "
                                                       f"{', '.join(_EFFECTS)}"))
        seconds = toleration.get("tolerationSeconds")
        if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, int)):
            problems.append(Problem(f"{field}.tolerationSeconds", f"{seconds!r} is not a whole number"))
        for key in ("key", "value"):
            if toleration.get(key) is not None and not isinstance(toleration.get(key), str):
                problems.append(Problem(f"{field}.{key}", f"{toleration.get(key)!r} is not text"))
    return problems
