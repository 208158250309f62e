"""Regenerate trainops/spec/image_tables.json from the SageMaker SDK's own image tables, plus the adjudications.

Runs in an oracle venv (tests/differential/build_oracle_venv.sh), where a pinned SDK is installed; the newest SDK's
tables are v3's (sagemaker-core's ``sagemaker/core/image_uri_config``, which v3 resolves images from), so:

    tests/differential/build_oracle_venv.sh --v3
    ~/.cache/trainops-oracle-v3/bin/python tests/differential/regenerate_tables.py

(the v2 venv works too: ``sagemaker/image_uri_config``; the script takes whichever the venv has, v3's first).

What comes from the SDK (image_uri_config/*.json, read from the installed package):
- the PyTorch and TensorFlow training versions, their Python versions and short-version aliases (pytorch.json,
  tensorflow.json, scope "training"), and per version where it is published: its repository (the legacy
  ``sagemaker-pytorch``, ``sagemaker-tensorflow-scriptmode`` and ``sagemaker-tensorflow`` ones for PyTorch <= 1.1
  and TensorFlow <= 1.12, 1.13.1 on Python 2), its account family (``dlc`` or ``legacy``: each family's accounts
  per region are the union over its versions, which never disagree) and the regions of its family it was never
  published in (``missing_regions``);
- the Trainium 1.11.0 image of the first Neuron generation (pytorch-neuron.json), whose repository and tag differ.

What trainops keeps beyond the SDK (each one a section of ADJUDICATIONS.md, "image-versions-beyond-the-sdk"): the
versions AWS's Deep Learning Containers list publishes and the SDK's tables do not have yet (e.g. PyTorch 2.9.0), the
pytorch-training-neuronx images, the SMP v2 images with their CUDA builds and the SMDDP versions (SageMaker developer
guide). Those entries are taken from the current image_tables.json as they are; the script never drops them. AWS's
release list itself (deep-learning-containers' available_images.md) is not on PyPI, the only registry reachable where
the tables are built, so it is not read here; tests/differential/test_image_tables_current.py checks that the table
knows every version and region of the SDK's config.

Writing is idempotent: run it twice and the file does not change.
"""

from __future__ import annotations

import importlib.util
import json
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TABLES = REPO / "trainops" / "spec" / "image_tables.json"
SDK_KNOWN = Path(__file__).resolve().parent / "goldens" / "sdk_image_versions.json"


def sdk_config() -> tuple[Path, str]:
    """The installed SDK's image_uri_config directory and the distribution it comes from: v3's (sagemaker-core)
    when installed, else v2's (sagemaker)."""
    for module, distribution in (("sagemaker.core", "sagemaker-core"), ("sagemaker", "sagemaker")):
        try:
            spec = importlib.util.find_spec(module)
        except ModuleNotFoundError:
            continue
        for location in (spec.submodule_search_locations or []) if spec else []:
            if (Path(location) / "image_uri_config" / "pytorch.json").is_file():
                return Path(location) / "image_uri_config", f"{distribution} {metadata.version(distribution)}"
    raise SystemExit("no SageMaker SDK with an image_uri_config here: run this in an oracle venv "
                     "(tests/differential/build_oracle_venv.sh --v3)")


SDK_CONFIG, SDK_NAME = sdk_config() if __name__ == "__main__" else (Path(), "")


def _sdk(name: str) -> dict:
    return json.loads((SDK_CONFIG / f"{name}.json").read_text())["training"]


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) if part.isdigit() else 0 for part in version.split("."))


DLC_ACCOUNT = "763104351884"  # the Deep Learning Containers' account in the first regions


def family(registries: dict) -> str:
    """``dlc`` for the Deep Learning Containers' accounts, ``legacy`` for the older framework images' ones."""
    return "dlc" if registries.get("us-east-1") == DLC_ACCOUNT else "legacy"


def families(*sdk_tables: dict) -> dict[str, dict]:
    """Each account family's account per region: the union over the versions of that family."""
    merged: dict[str, dict] = {"dlc": {}, "legacy": {}}
    for sdk in sdk_tables:
        for record in sdk["versions"].values():
            for image in _images(record).values():
                accounts = merged[family(image["registries"])]
                for region, account in image["registries"].items():
                    if accounts.setdefault(region, account) != account:
                        raise SystemExit(f"two accounts for {region} in one family: {accounts[region]}, {account}")
    return {name: dict(sorted(accounts.items())) for name, accounts in merged.items()}


def _images(record: dict) -> dict[str, dict]:
    """The version's image records: one for every Python version, or one per Python version (TF 1.13.1)."""
    if "registries" in record:
        return {"*": record}
    return {py: image for py, image in record.items() if isinstance(image, dict) and "registries" in image}


def _where(image: dict, default_repository: str, accounts: dict[str, dict]) -> dict:
    """repository / registry / missing_regions of one image, each only where it differs from the table's default."""
    found: dict = {}
    if image["repository"] != default_repository:
        found["repository"] = image["repository"]
    name = family(image["registries"])
    if name != "dlc":
        found["registry"] = name
    missing = sorted(set(accounts[name]) - set(image["registries"]))
    if missing:
        found["missing_regions"] = missing
    return found


def merge_training(table: dict, sdk: dict, accounts: dict[str, dict]) -> tuple[dict, list[str]]:
    """The trainops training table with the SDK's versions, Python versions, aliases, repositories and regions;
    trainops-only versions kept as they are."""
    versions = dict(table["versions"])
    for version, record in sdk["versions"].items():
        images = _images(record)
        mine = {key: value for key, value in versions.get(version, {}).items()
                if key not in ("py_versions", "repository", "registry", "missing_regions", "by_py")}
        if "*" in images:
            mine["py_versions"] = list(record["py_versions"])
            mine.update(_where(images["*"], table["repository"], accounts))
        else:
            mine["py_versions"] = sorted(images)
            mine["by_py"] = {py: _where(image, table["repository"], accounts) for py, image in sorted(images.items())}
        versions[version] = mine
    aliases = {alias: target for alias, target in {**table.get("version_aliases", {}),
                                                   **sdk.get("version_aliases", {})}.items() if target in versions}
    kept = sorted(set(table["versions"]) - set(sdk["versions"]), key=_version_key)
    ordered = {version: versions[version] for version in sorted(versions, key=_version_key)}
    return {**table, "version_aliases": dict(sorted(aliases.items(), key=lambda item: _version_key(item[0]))),
            "versions": ordered}, kept


def main() -> None:
    tables = json.loads(TABLES.read_text())
    pytorch, tensorflow, neuron = _sdk("pytorch"), _sdk("tensorflow"), _sdk("pytorch-neuron")
    notes = {}
    accounts = families(pytorch, tensorflow)
    # Regions AWS's DLC list publishes that the SDK's tables do not have yet stay (their versions: those kept).
    accounts["dlc"] = dict(sorted({**tables["registries"]["dlc"], **accounts["dlc"]}.items()))
    tables["images"]["pytorch"]["training"], notes["pytorch"] = merge_training(
        tables["images"]["pytorch"]["training"], pytorch, accounts)
    tables["images"]["tensorflow"]["training"], notes["tensorflow"] = merge_training(
        tables["images"]["tensorflow"]["training"], tensorflow, accounts)
    tables["registries"].update(accounts)
    # The first-generation Neuron image (trn1, PyTorch 1.11.0): its own repository and tag, from the SDK.
    table = tables["images"]["pytorch"]["neuron"]
    for version, record in neuron["versions"].items():
        sdk_version = record["sdk_versions"][-1]
        os_version = record["container_version"]["trn"]
        py = record["py_versions"][-1]
        table["versions"][version] = {
            "py_versions": list(record["py_versions"]), "repository": record["repository"],
            "tag": f"{version}-neuron-{py}-{sdk_version}-{os_version}", "neuron_sdk": sdk_version.removeprefix("sdk"),
            "instance_families": ["trn1", "trn1n"]}
    table["versions"] = {key: table["versions"][key] for key in sorted(table["versions"], key=_version_key)}
    table["version_aliases"] = {**neuron.get("version_aliases", {}), **table.get("version_aliases", {})}
    tables["_generated"] = {
        "by": "tests/differential/regenerate_tables.py (run in the oracle venv: see tests/differential/README.md)",
        "sdk": SDK_NAME,
        "kept_beyond_the_sdk": {"pytorch training": notes["pytorch"], "tensorflow training": notes["tensorflow"],
                                "neuron, smp, smddp": "AWS documentation (ADJUDICATIONS.md)"},
    }
    text = json.dumps(tables, indent=1) + "\n"
    TABLES.write_text(text)
    # What the SDK knows, for test_image_tables_current.py (which runs without the SDK).
    known = {"sdk": SDK_NAME}
    for name, sdk in (("pytorch", pytorch), ("tensorflow", tensorflow)):
        known[name] = {version: sorted({region for image in _images(record).values()
                                        for region in image["registries"]})
                       for version, record in sorted(sdk["versions"].items(), key=lambda item: _version_key(item[0]))}
        known[f"{name}_aliases"] = dict(sorted(sdk.get("version_aliases", {}).items()))
    SDK_KNOWN.write_text(json.dumps(known, indent=1) + "\n")
    print(f"{TABLES}: PyTorch {len(tables['images']['pytorch']['training']['versions'])} training versions, "
          f"TensorFlow {len(tables['images']['tensorflow']['training']['versions'])}; kept beyond the SDK: {notes}")


if __name__ == "__main__":
    main()
