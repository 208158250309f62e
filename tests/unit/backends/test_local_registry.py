"""The local model registry: versions, artifact copies, champion, approval updates, and concurrent registrations
from several processes."""

from __future__ import annotations

import json
import multiprocessing
import shutil
from pathlib import Path

import pytest

from trainops.backends.local.registry import LocalRegistry, default_registry_dir
from trainops.errors import JobFailed, SpecError


@pytest.fixture
def artifact(tmp_path):
    path = tmp_path / "run" / "output" / "model.tar.gz"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"model bytes")
    return path


@pytest.fixture
def registry(tmp_path):
    return LocalRegistry(tmp_path / "registry")


def test_register_copies_the_artifact_and_records_everything(registry, artifact, tmp_path):
    spec = {"name": "digits", "instance_count": 2}
    entry = registry.register(group="digits", model_artifact=f"file://{artifact}", metrics={"accuracy": 0.97},
                              spec=spec, description="first try", job_name="digits-abc")
    assert entry.version == 1 and entry.approval_status == "Approved"
    assert entry.metrics == {"accuracy": 0.97} and entry.spec == spec
    assert entry.source_artifact == str(artifact)
    assert entry.approval_history == [{"status": "Approved", "time": entry.created}]
    # The copy survives the run directory being deleted.
    shutil.rmtree(tmp_path / "run")
    assert Path(entry.model_artifact).read_bytes() == b"model bytes"
    assert Path(entry.model_artifact).parent == registry.root / "digits" / "v1"
    assert registry.get("digits", 1) == entry
    stored = json.loads((registry.root / "digits" / "v1" / "entry.json").read_text())
    assert stored["model_artifact"] == "model.tar.gz" and "path" not in stored


def test_a_registry_can_be_moved_whole(registry, artifact, tmp_path):
    registry.register(group="digits", model_artifact=artifact, metrics={"accuracy": 0.9})
    moved = LocalRegistry(shutil.move(str(registry.root), tmp_path / "elsewhere"))
    assert Path(moved.get("digits").model_artifact).read_bytes() == b"model bytes"


def test_directory_artifacts_are_copied(registry, tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "weights.pt").write_bytes(b"w")
    entry = registry.register(group="digits", model_artifact=model, metrics={"accuracy": 0.9})
    assert (Path(entry.model_artifact) / "weights.pt").read_bytes() == b"w"


def test_versions_champion_and_approval_updates(registry, artifact):
    first = registry.register(group="digits", model_artifact=artifact, metrics={"accuracy": 0.90})
    second = registry.register(group="digits", model_artifact=artifact, metrics={"accuracy": 0.95})
    third = registry.register(group="digits", model_artifact=artifact, metrics={"accuracy": 0.80}, approval="Rejected")
    registry.register(group="other", model_artifact=artifact, metrics={"f1": 0.5}, approval="PendingManualApproval")
    assert [first.version, second.version, third.version] == [1, 2, 3]
    assert registry.groups() == ["digits", "other"]
    assert [(entry.group, entry.version) for entry in registry.list()] == [
        ("digits", 1), ("digits", 2), ("digits", 3), ("other", 1)]
    assert registry.get("digits").version == 3  # latest by default
    assert registry.champion("digits").version == 2  # latest Approved, not latest
    assert registry.champion("other") is None
    assert registry.champion("missing") is None

    rejected = registry.set_approval("digits", 2, "Rejected")
    assert rejected.approval_status == "Rejected"
    assert [change["status"] for change in rejected.approval_history] == ["Approved", "Rejected"]
    assert registry.champion("digits").version == 1
    registry.set_approval("digits", 3, "Approved")
    assert registry.champion("digits").version == 3
    assert registry.get("digits", 2).approval_status == "Rejected"  # persisted


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"group": "bad group"}, "group"),
        ({"group": "-leading"}, "group"),
        ({"group": "x" * 64}, "group"),
        ({"approval": "approved"}, "approval"),
        ({"metrics": {"accuracy": "high"}}, "metrics.accuracy"),
        ({"metrics": [0.9]}, "metrics"),
        ({"model_artifact": "/does/not/exist.tar.gz"}, "model_artifact"),
        ({"model_artifact": "s3://bucket/model.tar.gz"}, "model_artifact"),
        ({"spec": {"value": object()}}, "spec"),
    ],
)
def test_bad_input_names_the_field(registry, artifact, arguments, field):
    values = {"group": "digits", "model_artifact": artifact, "metrics": {"accuracy": 0.9}}
    values.update(arguments)
    with pytest.raises(SpecError) as caught:
        registry.register(**values)
    assert caught.value.problems[0].path == field
    assert registry.list() == []


def test_unknown_group_or_version(registry, artifact):
    registry.register(group="digits", model_artifact=artifact, metrics={"accuracy": 0.9})
    with pytest.raises(SpecError) as caught:
        registry.get("nothing")
    assert "groups: digits" in str(caught.value)
    with pytest.raises(SpecError) as caught:
        registry.set_approval("digits", 7, "Approved")
    assert caught.value.problems[0].path == "version" and "versions: 1" in str(caught.value)
    with pytest.raises(SpecError) as caught:
        registry.set_approval("digits", 1, "Fine")
    assert caught.value.problems[0].path == "status"


def test_a_damaged_entry_is_reported_and_the_rest_stays_usable(registry, artifact):
    """One unreadable entry.json used to make every listing (and so every registration through the step) fail."""
    first = registry.register(group="digits", model_artifact=artifact, metrics={"accuracy": 0.9}, approval="Approved")
    broken = registry.register(group="digits", model_artifact=artifact, metrics={"accuracy": 0.8})
    (Path(broken.path) / "entry.json").write_text("{broken")
    assert [entry.version for entry in registry.list("digits")] == [1]
    [(group, version, why)] = registry.damaged("digits")
    assert (group, version) == ("digits", 2) and "entry.json cannot be read" in why
    assert registry.champion("digits").version == 1
    assert registry.get("digits").version == 1  # the latest usable one
    with pytest.raises(JobFailed):
        registry.get("digits", 2)
    later = registry.register(group="digits", model_artifact=artifact, metrics={"accuracy": 0.95})
    assert later.version == 3  # the damaged version's number is not given out again
    assert first.version == 1


@pytest.mark.parametrize("stored", ["../../../outside.bin", "/etc/hostname", "..", "missing.bin", "linked.bin"])
def test_an_entry_whose_artifact_is_not_the_registrys_own_copy_is_refused(registry, artifact, tmp_path, stored):
    outside = tmp_path / "outside.bin"
    outside.write_bytes(b"not the model")
    entry = registry.register(group="digits", model_artifact=artifact, metrics={"accuracy": 0.9})
    (Path(entry.path) / "linked.bin").symlink_to(outside)
    entry_file = Path(entry.path) / "entry.json"
    data = json.loads(entry_file.read_text())
    data["model_artifact"] = stored
    entry_file.write_text(json.dumps(data))
    assert registry.list("digits") == []
    assert "artifact" in registry.damaged("digits")[0][2]


def test_an_entry_json_that_is_a_link_is_not_followed(registry, artifact, tmp_path):
    entry = registry.register(group="digits", model_artifact=artifact, metrics={"accuracy": 0.9})
    copy = tmp_path / "elsewhere.json"
    shutil.copy(Path(entry.path) / "entry.json", copy)
    (Path(entry.path) / "entry.json").unlink()
    (Path(entry.path) / "entry.json").symlink_to(copy)
    assert registry.list("digits") == [] and len(registry.damaged("digits")) == 1


@pytest.mark.parametrize("link_to", ["file", "directory"])
def test_a_model_directory_with_a_link_is_refused(registry, tmp_path, link_to):
    """A link to /etc/shadow (or to /etc) in a model directory put a copy of its target in the registry."""
    secret_dir = tmp_path / "etc"
    secret_dir.mkdir()
    (secret_dir / "shadow").write_text("root:secret-hash\n")
    model = tmp_path / "model"
    (model / "sub").mkdir(parents=True)
    (model / "weights.bin").write_bytes(b"w")
    (model / "sub" / "leak").symlink_to(secret_dir / "shadow" if link_to == "file" else secret_dir)
    with pytest.raises(SpecError) as caught:
        registry.register(group="digits", model_artifact=model, metrics={"accuracy": 0.9})
    assert caught.value.problems[0].path == "model_artifact"
    assert "sub/leak is a symbolic link" in str(caught.value)
    assert registry.list("digits") == []
    leaked = [path for path in registry.root.rglob("*") if path.name in ("shadow", "leak")]
    assert leaked == []
    assert list((registry.root / "digits" / ".staging").iterdir()) == []


def test_a_fifo_in_a_model_directory_is_refused_without_hanging(registry, tmp_path):
    import os

    model = tmp_path / "model"
    model.mkdir()
    os.mkfifo(model / "pipe")
    with pytest.raises(SpecError) as caught:
        registry.register(group="digits", model_artifact=model, metrics={"accuracy": 0.9})
    assert "not a regular file" in str(caught.value)


def test_a_deep_model_directory_is_copied(registry, tmp_path):
    model = tmp_path / "model"
    deep = model.joinpath(*["d"] * 300)
    deep.mkdir(parents=True)
    (deep / "leaf.bin").write_bytes(b"leaf")
    entry = registry.register(group="digits", model_artifact=model, metrics={"accuracy": 0.9})
    assert Path(entry.model_artifact).joinpath(*["d"] * 300, "leaf.bin").read_bytes() == b"leaf"


def _register_one_job(root: str, artifact: str, barrier, results) -> None:
    barrier.wait()
    results.put(LocalRegistry(root).register(group="digits", model_artifact=artifact, metrics={"accuracy": 0.9},
                                             job_name="digits-2024").version)


def test_concurrent_registrations_of_one_job_make_one_version(registry, artifact):
    """Ten processes registering the same training job at once (a retried task racing the first try) made ten
    versions: the decision is now taken under the group's lock."""
    context = multiprocessing.get_context("fork")
    barrier, results = context.Barrier(10), context.Queue()
    processes = [context.Process(target=_register_one_job, args=(str(registry.root), str(artifact), barrier, results))
                 for _ in range(10)]
    for process in processes:
        process.start()
    versions = [results.get(timeout=120) for _ in processes]
    for process in processes:
        process.join(timeout=60)
    assert [process.exitcode for process in processes] == [0] * 10
    assert versions == [1] * 10
    assert [entry.version for entry in registry.list("digits")] == [1]
    assert list((registry.root / "digits" / ".staging").iterdir()) == []


def test_default_directory_follows_trainops_home(monkeypatch, tmp_path):
    monkeypatch.setenv("TRAINOPS_HOME", str(tmp_path / "home"))
    assert default_registry_dir() == (tmp_path / "home" / "registry").resolve()
    assert LocalRegistry().root == (tmp_path / "home" / "registry").resolve()


def _register_many(root: str, artifact: str, worker: int, count: int) -> None:
    registry = LocalRegistry(root)
    for index in range(count):
        registry.register(group="digits", model_artifact=artifact, metrics={"worker": worker, "index": index},
                          job_name=f"worker-{worker}-{index}")


def test_concurrent_registrations_lose_nothing_and_never_reuse_a_number(registry, artifact):
    workers, per_worker = 4, 6
    context = multiprocessing.get_context("fork")
    processes = [context.Process(target=_register_many, args=(str(registry.root), str(artifact), worker, per_worker))
                 for worker in range(workers)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
    assert [process.exitcode for process in processes] == [0] * workers
    entries = registry.list("digits")
    assert [entry.version for entry in entries] == list(range(1, workers * per_worker + 1))
    assert sorted(entry.job_name for entry in entries) == sorted(
        f"worker-{worker}-{index}" for worker in range(workers) for index in range(per_worker))
    for entry in entries:
        assert Path(entry.model_artifact).read_bytes() == b"model bytes"
    # Nothing left half-done in the staging area.
    assert list((registry.root / "digits" / ".staging").iterdir()) == []
