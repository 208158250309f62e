"""The per-user job index (`trainops.job_index`): what a submit remembers, read back as input (bounded, typed,
corrupt entries skipped with a warning), nothing secret kept, and concurrent writers that never leave half a record."""

from __future__ import annotations

import json
import multiprocessing
import os

import pytest

from trainops import job_index
from trainops.backends.api import JobHandle
from trainops.job_index import JobEntry, entries, parse_entry, remember, remember_job


@pytest.fixture(autouse=True)
def index(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINOPS_JOB_INDEX", str(tmp_path / "index"))
    monkeypatch.setenv("TRAINOPS_HOME", str(tmp_path / "home"))
    return tmp_path / "index"


class FakeBackend:
    CONTEXT = frozenset({"workdir"})
    named_as = "team-box"

    def where(self):
        return "somewhere"


def test_a_submit_is_remembered_with_its_place_and_found_by_name(tmp_path):
    remember_job(FakeBackend(), JobHandle("local", "job-1", workdir=str(tmp_path / "wd")))
    [entry] = entries(name="job-1")
    assert (entry.name, entry.backend, entry.named_as) == ("job-1", "local", "team-box")
    assert entry.location == {"workdir": str(tmp_path / "wd")} and entry.kind == "training"
    assert entries(name="job-2") == [] and [found.name for found in entries()] == ["job-1"]


def test_the_default_state_root_is_kept_so_a_later_home_does_not_lose_the_job(tmp_path):
    remember_job(FakeBackend(), JobHandle("local", "job-1"))
    [entry] = entries(name="job-1")
    assert entry.location == {"workdir": str((tmp_path / "home").resolve())}


def test_a_re_attach_keeps_the_first_start_and_the_pipeline():
    first = JobEntry(name="job-1", backend="local", started=100.0, pipeline={"name": "p", "record": "/r.json"})
    remember(first)
    remember(JobEntry(name="job-1", backend="local", started=200.0))
    [entry] = entries(name="job-1")
    assert entry.started == 100.0 and entry.pipeline == {"name": "p", "record": "/r.json"}


def test_the_same_name_in_two_places_is_two_entries_newest_first():
    remember(JobEntry(name="job-1", backend="local", location={"workdir": "/a"}, started=100.0))
    remember(JobEntry(name="job-1", backend="sagemaker", location={"region": "eu-west-1"}, started=200.0))
    assert [entry.backend for entry in entries(name="job-1")] == ["sagemaker", "local"]


class ClusterBackend:
    CONTEXT = frozenset({"shared_dir", "rest_url", "rest_token_file"})

    def where(self):
        return "a cluster"


def test_nothing_secret_is_kept():
    handle = JobHandle("slurm", "job-1", location={"shared_dir": "/fsx/me", "rest_token": "eyJhbGciOi",
                                                   "rest_url": "http://user:hunter2@host:6820",
                                                   "rest_token_file": "/home/me/.token"})
    remember_job(ClusterBackend(), handle)
    [path] = list((job_index.index_dir() / "jobs").iterdir())
    text = path.read_text()
    assert "eyJhbGciOi" not in text and "hunter2" not in text
    [entry] = entries(name="job-1")
    # where the job is stays (the token's file is a path, not the token); what looks secret is gone
    assert entry.location == {"shared_dir": "/fsx/me", "rest_token_file": "/home/me/.token"}


def test_the_files_are_the_users_own(index):
    remember(JobEntry(name="job-1", backend="local", started=1.0))
    assert (index / "jobs").stat().st_mode & 0o077 == 0


@pytest.mark.parametrize(("content", "why"), [
    (b"{not json", "Expecting"),
    (b"[]", "not a JSON object"),
    (json.dumps({"name": "../etc", "backend": "local", "started": 1}).encode(), "name is not a job name"),
    (json.dumps({"name": "a", "backend": "local", "started": "yesterday"}).encode(), "started is not a time"),
    (json.dumps({"name": "a", "backend": "local", "started": 1, "location": {"workdir": 3}}).encode(),
     "location is not a small mapping"),
    (json.dumps({"name": "a", "backend": "local", "started": 1, "kind": "evil"}).encode(), "kind is not one of"),
    (b"{" + b" " * (job_index.MAX_ENTRY_BYTES + 1) + b"}", "larger than"),
    (b"\xff\xfe", "codec"),
])
def test_a_corrupt_entry_is_skipped_with_a_warning_and_the_others_stand(index, content, why):
    remember(JobEntry(name="good-1", backend="local", started=5.0))
    (index / "jobs" / "a.bad.json").write_bytes(content)
    warnings: list[str] = []
    assert [entry.name for entry in entries(warn=warnings.append)] == ["good-1"]
    [warning] = warnings
    assert "a.bad.json skipped" in warning and why in warning


def test_a_link_in_the_index_is_not_followed(index, tmp_path):
    remember(JobEntry(name="good-1", backend="local", started=5.0))
    target = tmp_path / "elsewhere.json"
    target.write_text(json.dumps({"name": "planted", "backend": "local", "started": 9.0}))
    (index / "jobs" / "planted.x.json").symlink_to(target)
    warnings: list[str] = []
    assert [entry.name for entry in entries(warn=warnings.append)] == ["good-1"]
    assert len(warnings) == 1 and "planted.x.json skipped" in warnings[0]


def test_the_index_is_bounded(index, monkeypatch):
    monkeypatch.setattr(job_index, "MAX_ENTRIES", 5)
    for number in range(8):
        remember(JobEntry(name=f"job-{number}", backend="local", started=float(number)))
    assert len(os.listdir(index / "jobs")) == 5


def test_an_unwritable_index_is_a_warning_not_a_failed_submit(index, caplog):
    index.parent.mkdir(parents=True, exist_ok=True)
    index.write_text("a file where the directory goes")
    assert remember(JobEntry(name="job-1", backend="local", started=1.0)) is None
    assert "could not remember job job-1" in caplog.text


def test_parse_entry_round_trips():
    entry = JobEntry(name="job-1", backend="local", location={"workdir": "/w"}, started=12.5, where="/w/jobs",
                     pipeline={"name": "p", "record": "/w/pipelines/p/last-run.json"})
    assert parse_entry(json.loads(json.dumps(entry.to_dict()))) == entry


def _write_many(args: tuple[str, int]) -> None:
    directory, worker = args
    os.environ["TRAINOPS_JOB_INDEX"] = directory
    for number in range(40):
        # every worker rewrites the shared job-0 and writes its own jobs
        remember(JobEntry(name="job-0", backend="local", started=float(number)))
        remember(JobEntry(name=f"w{worker}-{number}", backend="local", started=float(number)))


def test_concurrent_writers_leave_whole_records_and_no_temporaries(index):
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        pool.map(_write_many, [(str(index), worker) for worker in range(4)])
    warnings: list[str] = []
    found = entries(warn=warnings.append)
    assert warnings == []
    assert len(found) == 1 + 4 * 40
    assert [name for name in os.listdir(index / "jobs") if not name.endswith(".json")] == []


@pytest.mark.parametrize(("name", "settings"), [
    ("local", {"workdir": "/srv/runs/digits"}),
    ("sagemaker", {"region": "eu-west-1"}),
    ("slurm", {"shared_dir": "/fsx/me/trainops", "transport": "rest", "rest_url": "http://head:6820",
               "rest_user": "me", "rest_token_file": "/home/me/.slurm-token"}),
])
def test_each_backend_opens_again_where_its_job_lives_from_what_the_index_kept(name, settings):
    """What the index keeps of a handle is the settings that reach the backend: opened with them, each built-in
    backend's jobs live where they did (the same location), so `status NAME` looks in the right place."""
    from trainops.backends.api import get_backend

    backend = get_backend(name, options=settings)
    remember_job(backend, backend.handle("job-1", created=True))
    [entry] = entries(name="job-1")
    again = get_backend(entry.backend, options=entry.location, source="the job index")
    assert again.location() == backend.location() and again.location()
