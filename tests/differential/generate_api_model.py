"""Regenerate trainops/spec/sagemaker_api.json from botocore's SageMaker service model (the installed botocore).

Runs in trainops' own venv, where botocore is pinned by constraints.txt:

    .venv/bin/python tests/differential/generate_api_model.py

What it writes, nothing typed by hand:
- ``training_instance_types``: the enum ``TrainingInstanceType`` (the instance types CreateTrainingJob takes);
- ``create_training_job``: every constraint of CreateTrainingJob's input the service model states, by request path
  (``Tags[].Key``, ``HyperParameters{key}``, ``InputDataConfig[].DataSource.S3DataSource.S3Uri``): ``min`` / ``max``
  (a string's length, a list's or map's entries, an integer's value), ``pattern`` (the API's regular expression, in
  Java's syntax as the model gives it) and ``enum`` (except the instance types, listed once above).

botocore itself checks only the minimums before sending; the service checks the rest after trainops would have
uploaded the code. `trainops.backends.request.api_limits` checks the whole rendered request against this file before
anything is created. tests/differential/test_api_model.py fails when the file and the installed botocore disagree
(a botocore upgrade in constraints.txt): run this script then.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import botocore
import botocore.session

REPO = Path(__file__).resolve().parents[2]
TARGET = REPO / "trainops" / "spec" / "sagemaker_api.json"
#: Enumerations listed once at the top level instead of at each path that uses them.
LISTED_APART = {"TrainingInstanceType": "training_instance_types"}
CONSTRAINTS = ("min", "max", "pattern")


def _walk(shape: Any, path: str, out: dict[str, dict[str, Any]]) -> None:
    facts: dict[str, Any] = {key: shape.metadata[key] for key in CONSTRAINTS if key in shape.metadata}
    if shape.type_name == "string" and shape.enum:
        facts["enum"] = {"listed": LISTED_APART[shape.name]} if shape.name in LISTED_APART else list(shape.enum)
    if facts and path:
        out[path] = {"type": shape.type_name, **facts}
    if shape.type_name == "structure":
        for name, member in shape.members.items():
            _walk(member, f"{path}.{name}" if path else name, out)
    elif shape.type_name == "list":
        _walk(shape.member, f"{path}[]", out)
    elif shape.type_name == "map":
        _walk(shape.key, f"{path}{{key}}", out)
        _walk(shape.value, f"{path}{{value}}", out)


def build() -> dict[str, Any]:
    """The file's content from the installed botocore."""
    model = botocore.session.get_session().get_service_model("sagemaker")
    request: dict[str, dict[str, Any]] = {}
    _walk(model.operation_model("CreateTrainingJob").input_shape, "", request)
    return {
        "_source": "botocore's service model of SageMaker (data/sagemaker/*/service-2.json); written by "
                   "tests/differential/generate_api_model.py, do not edit",
        "botocore": botocore.__version__,
        "api_version": model.api_version,
        "training_instance_types": sorted(model.shape_for("TrainingInstanceType").enum),
        "create_training_job": request,
    }


def render_text(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=1, sort_keys=False) + "\n"


def main() -> int:
    TARGET.write_text(render_text(build()))
    print(f"wrote {TARGET.relative_to(REPO)} from botocore {botocore.__version__}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
