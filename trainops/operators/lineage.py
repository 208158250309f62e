"""OpenLineage for the trainops operators: which data went in (S3, FSx, local) and which model came out.

Datasets are named by the OpenLineage naming conventions: S3 objects as namespace ``s3://<bucket>``, name ``<key>``;
local files as namespace ``file``, name the absolute path. FSx for Lustre and EFS have no convention yet; they get
namespace ``fsx://<file system id>`` (``efs://`` for EFS) and the directory path as name, which keeps the file system
identity (the thing that joins lineage across jobs) in the namespace, as the S3 convention does with the bucket.

Operators compute the datasets while they run (`remember_lineage`) and the OpenLineage provider, when it is
installed, asks for them through ``get_openlineage_facets_on_complete`` (`LineageMixin`). Without the provider
nothing here imports OpenLineage and the method returns None.
"""

from __future__ import annotations

import os
from typing import Any

#: Attribute of an operator holding ``{"inputs": [(namespace, name)], "outputs": [...]}``.
LINEAGE_ATTRIBUTE = "_trainops_lineage"

Dataset = tuple[str, str]


def dataset_for(location: str | os.PathLike[str]) -> Dataset | None:
    """(namespace, name) of a location: ``s3://bucket/key``, ``fsx://fs-.../path``, ``file://...`` or a local path.

    None for what is not a dataset location (empty values).
    """
    text = os.fspath(location).strip() if location is not None else ""
    if not text:
        return None
    if "://" in text:
        scheme, _, rest = text.partition("://")
        if scheme == "file":
            return "file", "/" + rest.lstrip("/")
        authority, _, path = rest.partition("/")
        return f"{scheme}://{authority}", path or "/"
    return "file", os.path.abspath(text)


def channel_dataset(channel: Any) -> Dataset | None:
    """The dataset of a job spec channel: its S3 URI, or its file system and directory."""
    file_system_id = getattr(channel, "file_system_id", None)
    if file_system_id:
        scheme = "efs" if getattr(channel, "file_system_type", "") == "EFS" else "fsx"
        return f"{scheme}://{file_system_id}", channel.directory_path
    return dataset_for(getattr(channel, "s3_data", "") or "")


def training_datasets(spec: Any, channel_overrides: dict[str, str] | None,
                      model_artifact: str | None) -> dict[str, list[Dataset]]:
    """Inputs: every channel of the spec (a local override replaces the channel's remote source); output: the model."""
    overrides = channel_overrides or {}
    inputs = []
    for name, channel in spec.channels.items():
        dataset = dataset_for(overrides[name]) if name in overrides else channel_dataset(channel)
        if dataset:
            inputs.append(dataset)
    outputs = [dataset for dataset in [dataset_for(model_artifact or "")] if dataset]
    return {"inputs": inputs, "outputs": outputs}


def remember_lineage(operator: Any, inputs: list[Any], outputs: list[Any]) -> None:
    """Keep the operator's datasets for OpenLineage (locations or ready (namespace, name) pairs)."""
    def datasets(items: list[Any]) -> list[Dataset]:
        found = [item if isinstance(item, tuple) else dataset_for(item) for item in items if item]
        return [item for item in found if item]

    setattr(operator, LINEAGE_ATTRIBUTE, {"inputs": datasets(inputs), "outputs": datasets(outputs)})


class LineageMixin:
    """Gives an operator ``get_openlineage_facets_on_complete``, built from what `remember_lineage` recorded."""

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        recorded = getattr(self, LINEAGE_ATTRIBUTE, None)
        if not recorded:
            return None
        try:
            from airflow.providers.openlineage.extractors import OperatorLineage
            from openlineage.client.event_v2 import Dataset as OpenLineageDataset
        except ImportError:  # the OpenLineage provider is optional
            return None
        return OperatorLineage(
            inputs=[OpenLineageDataset(namespace=namespace, name=name) for namespace, name in recorded["inputs"]],
            outputs=[OpenLineageDataset(namespace=namespace, name=name) for namespace, name in recorded["outputs"]],
        )
