"""Training-image resolution: which AWS Deep Learning Container a job runs in when no ``image_uri`` is given.

The SageMaker Python SDK answers this from JSON tables (``image_uri_config/*.json``); trainops keeps the same facts
in ``image_tables.json`` next to this module and resolves from framework, framework version, Python version,
instance type and region:

- GPU or CPU ``pytorch-training`` / ``tensorflow-training`` images, picked by the instance catalog's accelerator;
  the oldest versions live in the earlier repositories and accounts (``sagemaker-pytorch`` for PyTorch <= 1.1,
  ``sagemaker-tensorflow-scriptmode`` for TensorFlow 1.11-1.13 on Python 2), and a version is resolved only in the
  regions it was published in (``missing_regions``; the SDK's per-version tables);
- ``pytorch-training-neuronx`` images (full tags) for Trainium (``ml.trn*``);
- SMP v2 images (``smdistributed-modelparallel``) when the SageMaker model parallelism library v2 is used.

Standard library only (plus the stdlib-only instance catalog), so the spec layer can call it without I/O or heavy
imports. Bad input raises ``SpecError`` whose problems name the field (``framework_version``, ``py_version``,
``region``, ...) and list what is supported.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from functools import lru_cache
from importlib import resources
from typing import Any

from trainops.errors import Problem, SpecError
from trainops.runtime import catalog

_DATA_FILE = "image_tables.json"

#: The kinds of image tables; "gpu" and "cpu" are the two processors of the "training" table.
KINDS = ("training", "gpu", "cpu", "neuron", "smp")

_FRAMEWORK_TITLES = {"pytorch": "PyTorch", "tensorflow": "TensorFlow"}
_KIND_WORDS = {"training": "training", "neuron": "Trainium (Neuron) training", "smp": "SMP v2 training"}


@lru_cache(maxsize=1)
def _tables() -> dict[str, Any]:
    text = resources.files(__package__).joinpath(_DATA_FILE).read_text(encoding="utf-8")
    return json.loads(text)


def _version_key(version: str) -> tuple[int, ...]:
    # "2.10.1" sorts after "2.9.2"; a non-numeric part ("0rc1") counts by its leading digits
    key = []
    for part in version.split("."):
        match = re.match(r"\d*", part)  # always matches (maybe empty)
        digits = match.group() if match else ""
        key.append(int(digits) if digits else 0)
    return tuple(key)


def is_version_at_least(version: str, minimum: str) -> bool:
    """Whether a dotted version is at least ``minimum``, comparing numerically part by part ("2.10" >= "2.9";
    missing parts count as 0, so "2.1" equals "2.1.0"). For framework-version rules such as "pytorchddp needs
    PyTorch >= 1.12.0"; no ``packaging`` import."""
    left, right = list(_version_key(str(version))), list(_version_key(str(minimum)))
    width = max(len(left), len(right))
    left += [0] * (width - len(left))
    right += [0] * (width - len(right))
    return left >= right


def _sorted_versions(versions: Any) -> list[str]:
    return sorted(versions, key=_version_key)


def _table(framework: str, kind: str) -> dict[str, Any] | None:
    section = "training" if kind in ("gpu", "cpu") else kind
    return _tables()["images"].get(framework, {}).get(section)


def supported_versions(framework: str, kind: str = "training") -> list[str]:
    """Every full framework version that has a training image of this kind, oldest first.

    ``kind`` is ``"training"`` (the GPU/CPU framework containers; ``"gpu"`` and ``"cpu"`` give the same list),
    ``"neuron"`` (Trainium) or ``"smp"`` (SMP v2). An unknown framework or a kind the framework lacks (TensorFlow
    has no Neuron or SMP v2 training images) gives an empty list; an unknown kind is a ``ValueError``.
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
    table = _table(str(framework).lower(), kind)
    return _sorted_versions(table["versions"]) if table else []


def smddp_supported_pytorch_versions() -> list[str]:
    """PyTorch versions whose SageMaker framework container (``pytorch-training``, GPU) ships the SMDDP library,
    per the AWS SMDDP documentation. The SMP v2 images also ship SMDDP: see ``smp_v2_versions``."""
    return _sorted_versions(_tables()["smddp"]["pytorch_versions"])


def smp_v2_versions() -> dict[str, str]:
    """PyTorch version -> the SMP v2 library version its newest SMP Docker image carries."""
    versions = _tables()["images"]["pytorch"]["smp"]["versions"]
    return {version: versions[version]["smp_library"] for version in _sorted_versions(versions)}


def _dns_suffix(region: str) -> str:
    for prefix, suffix in _tables()["dns_suffixes"]:
        if region.startswith(prefix):
            return suffix
    return "amazonaws.com"


def _processor(instance_type: str) -> str:
    """gpu, cpu or neuron for an instance type: the catalog first, then the name for types it does not know."""
    if instance_type == "local_gpu":
        return "gpu"
    if catalog.is_local(instance_type):
        return "cpu"
    instance = catalog.lookup(instance_type)
    if instance is not None:
        return {"nvidia": "gpu", "neuron": "neuron"}.get(instance.accelerator or "", "cpu")
    # Like the SDK: accelerated families are named p* and g* (NVIDIA) and trn* (Trainium).
    family = catalog.family_of(instance_type)
    if family.startswith("trn"):
        return "neuron"
    if family[:1] in ("p", "g"):
        return "gpu"
    return "cpu"


def image_instance_type(instance_types: Sequence[str]) -> str | None:
    """The instance type a heterogeneous cluster's image is picked for: every instance group runs the one image (AWS's
    heterogeneous-cluster guide), so a GPU image whenever a group has GPUs, as the SDK's estimator decides
    (``_get_instance_type``), else a Trainium (Neuron) image for a Trainium group, else the first group's."""
    for processor in ("gpu", "neuron"):
        for instance_type in instance_types:
            if _processor(instance_type) == processor:
                return instance_type
    return instance_types[0] if instance_types else None


def _resolve_version(requested: str, table: dict[str, Any]) -> str | None:
    versions, aliases = table["versions"], table.get("version_aliases", {})
    if requested in versions:
        return requested
    return aliases.get(requested)


def _unknown_version_message(requested: str, table: dict[str, Any], what: str) -> str:
    versions = _sorted_versions(table["versions"])
    message = f"{what} has no image for version {requested!r}; supported versions: {', '.join(versions)}"
    short_forms = _sorted_versions(table.get("version_aliases", {}))
    if short_forms:
        message += f" (or the short forms {', '.join(short_forms)})"
    message += ". Pick one of these, or set image_uri to an image of your own"
    same_line = [v for v in versions if v.split(".")[:2] == requested.split(".")[:2]]
    if same_line:
        message += f" (did you mean {same_line[-1]}?)"
    return message


def resolve_training_image(
    framework: str,
    framework_version: str,
    py_version: str | None,
    instance_type: str,
    region: str,
    *,
    smp_v2: bool = False,
    neuron: bool | None = None,
) -> str:
    """The ECR URI of the AWS training image for a job, as the SageMaker SDK would pick it.

    ``framework`` is ``"pytorch"`` or ``"tensorflow"``. The instance type picks the image family: the catalog's
    accelerator decides GPU or CPU; ``ml.trn*`` (or ``neuron=True``) picks the Trainium ``pytorch-training-neuronx``
    image; ``smp_v2=True`` picks the SMP v2 image
    (``658645717510.dkr.ecr.<region>.amazonaws.com/smdistributed-modelparallel:<torch>-gpu-<py>-<cuda>``).
    Short versions resolve like the SDK's aliases ("2.1" -> "2.1.0"); ``py_version=None`` takes the version's
    default (its newest Python). China regions use the ``amazonaws.com.cn`` domain.

    Raises ``SpecError`` with every problem found, each naming its field: ``framework``, ``framework_version``,
    ``py_version``, ``region`` or ``instance_type``, with the supported values in the message.
    """
    name = str(framework).lower()
    if name not in _tables()["images"]:
        supported = ", ".join(sorted(_tables()["images"]))
        raise SpecError(Problem("framework", f"no training images for framework {framework!r}; use one of: "
                                              f"{supported}, or set image_uri"))
    title = _FRAMEWORK_TITLES.get(name, name)
    if not isinstance(instance_type, str) or not instance_type.strip():
        raise SpecError(Problem("instance_type", "is required to pick the training image (an ml.* type such as "
                                                 "ml.p4d.24xlarge, or local / local_gpu); or set image_uri"))
    processor = _processor(instance_type.strip())

    if smp_v2 and (neuron or processor != "gpu"):
        raise SpecError(Problem("instance_type", f"SMP v2 images run on NVIDIA GPU instances only, not "
                                                 f"{instance_type!r}; pick a GPU type such as ml.p4d.24xlarge or "
                                                 f"ml.p5.48xlarge"))
    if neuron is False and processor == "neuron":
        raise SpecError(Problem("instance_type", f"{instance_type} is a Trainium instance and needs a Neuron "
                                                 f"image; leave neuron unset or pick a GPU/CPU instance type"))
    kind = "smp" if smp_v2 else "neuron" if (neuron or processor == "neuron") else "training"
    table = _table(name, kind)
    if table is None:
        raise SpecError(Problem("framework", f"{title} has no {_KIND_WORDS[kind]} images; Trainium and SMP v2 "
                                             f"need framework 'pytorch'"))

    problems: list[Problem] = []
    what = f"{title} {_KIND_WORDS[kind]}"
    version = _resolve_version(str(framework_version).strip(), table)
    if version is None:
        problems.append(Problem("framework_version", _unknown_version_message(str(framework_version), table, what)))

    py = None
    if version is not None:
        py = table["versions"][version]["py_versions"][-1] if py_version is None else str(py_version)
    where = _published(table, version, py)
    registry = _tables()["registries"][where["registry"]]
    account = registry.get(region)
    if account is None:
        problems.append(Problem("region", f"no {where['repository']} images in region {region!r}; available in: "
                                          f"{', '.join(sorted(registry))}. Use one of these regions or set "
                                          f"image_uri to an image in your region"))
    elif region in where["missing_regions"]:
        published = sorted(set(registry) - set(where["missing_regions"]))
        problems.append(Problem("framework_version", f"{what} {version} was never published in region {region!r} "
                                                     f"(it is in {', '.join(published)}): pick a newer version, "
                                                     "one of those regions, or set image_uri"))
    if version is not None and kind == "training" and name == "tensorflow" \
            and not is_version_at_least(version, LEGACY_MODE_ONLY_BELOW):
        # The SDK's rule: these images run only the legacy (pre-script-mode) interface, which it does not build.
        problems.append(Problem("framework_version", f"TensorFlow {version} supports only legacy mode, which trainops "
                                                     f"(like the SDK) does not launch: use TensorFlow 1.11 or newer, "
                                                     f"or set image_uri to the legacy image yourself"))
    if version is not None and kind == "neuron":
        families = table["versions"][version].get("instance_families")
        family = catalog.family_of(instance_type.strip())
        if families and family not in families:
            newer = [v for v in _sorted_versions(table["versions"])
                     if not table["versions"][v].get("instance_families")]
            problems.append(Problem("framework_version", f"Trainium {family} has no PyTorch {version} Neuron image "
                                                         f"(that image runs on {', '.join(families)} only); use one "
                                                         f"of {', '.join(newer)}"))
    if version is not None:
        record = table["versions"][version]
        choices = record["py_versions"]
        if py not in choices:
            problems.append(Problem("py_version", f"{what} {version} images are built for "
                                                  f"{', '.join(choices)}, not {py!r}; set py_version to one of "
                                                  f"these (or leave it out)"))
    if problems:
        raise SpecError(problems)

    record = table["versions"][version]
    if kind == "neuron":
        tag = record["tag"]
    elif kind == "smp":
        tag = f"{version}-gpu-{py}-{record['cuda']}"
    else:
        # The SDK tags the image with the version as written: "2.3" gives the DLC's short tag 2.3-gpu-py311.
        tag = f"{str(framework_version).strip()}-{'gpu' if processor == 'gpu' else 'cpu'}-{py}"
    return f"{account}.dkr.ecr.{region}.{_dns_suffix(region)}/{where['repository']}:{tag}"


#: TensorFlow versions below this one have images for the legacy interface only (the SDK: 1.10.0 and older).
LEGACY_MODE_ONLY_BELOW = "1.11"


def _published(table: dict[str, Any], version: str | None, py: str | None) -> dict[str, Any]:
    """Where a version's image is published: repository, registry (account family) and the regions of that family
    it is missing from; the table's defaults, overridden by the version's record and then by its Python version's
    (TensorFlow 1.13.1: Python 2 in the legacy repository, Python 3 in the DLC one)."""
    record = table["versions"].get(version, {}) if version is not None else {}
    where: dict[str, Any] = {"repository": table["repository"], "registry": table["registry"], "missing_regions": []}
    for layer in (record, (record.get("by_py") or {}).get(py or "", {})):
        where.update({key: layer[key] for key in ("repository", "registry", "missing_regions") if key in layer})
    return where
