"""Settings and files are input (issue 48 items 1-3, and issue 47's Slurm case): sbatch options read as sbatch reads
them, slurmrestd refusing what it cannot take, poll_seconds, shared directories holding % or é, checkpoint keys, the
job's own records, the REST token file, squeue's answers holding other users' bytes, a machine with no Slurm
configuration. The real cluster's side is tests/system/test_slurm_shared_cluster.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from trainops.backends import get_backend
from trainops.backends.slurm import records, status
from trainops.backends.slurm.cli import CommandTransport
from trainops.backends.slurm.rest import read_token
from trainops.backends.slurm.script import BatchJob, rest_job
from trainops.backends.slurm.transport import SlurmJob, SlurmUnreachable, Transport
from trainops.errors import SpecError
from trainops.spec.loader import parse_job_spec


@pytest.fixture
def spec(tmp_path):
    (tmp_path / "train.py").write_text("print('hi')\n")
    return parse_job_spec({"name": "bert", "entry_point": "train.py", "source_dir": str(tmp_path),
                           "instance_type": "ml.c5.xlarge", "instance_count": 2, "max_run": 600})


def backend(tmp_path, **options):
    return get_backend("slurm", options={"shared_dir": str(tmp_path / "shared"), **options})


def refused(call, *fields: str) -> str:
    with pytest.raises(SpecError) as raised:
        call()
    text = str(raised.value)
    for field in fields:
        assert field in text, text
    return text


# --- sbatch options, as sbatch reads their names ----------------------------------------------------------------
@pytest.mark.parametrize(("name", "taken_for"), [("comm", "comment"), ("job", "job-name"), ("outp", "output"),
                                                 ("chd", "chdir"), ("parti", "partition"), ("no-req", "no-requeue"),
                                                 ("J", None), ("wrap", "wrap"), ("hold", "hold")])
def test_an_sbatch_option_trainops_sets_is_refused_under_any_prefix_sbatch_takes_for_it(tmp_path, name, taken_for):
    text = refused(lambda: backend(tmp_path, sbatch_options={name: "x"}), f"sbatch_options.{name}")
    if taken_for and taken_for != name:
        assert f"sbatch reads it as --{taken_for}" in text


@pytest.mark.parametrize(("options", "rendered"), [
    ({"gres": "gpu:8"}, "#SBATCH --gres=gpu:8"),
    ({"mem-per-c": "2G"}, "#SBATCH --mem-per-cpu=2G"),  # a prefix, rendered by the option's full name
    ({"--export": "NONE"}, "#SBATCH --export=NONE"),
    ({"overcommit": "true"}, "#SBATCH --overcommit"),
])
def test_an_option_sbatch_would_take_is_passed_on_by_its_full_name(spec, tmp_path, options, rendered):
    script = backend(tmp_path, sbatch_options=options).render_request(spec, "bert-1")
    assert rendered in script.splitlines()


@pytest.mark.parametrize(("options", "why"), [
    ({"mem-per": "1G"}, "is ambiguous"), ({"frobnicate": "1"}, "is not an sbatch option"),
    ({"uid": "0"}, "is not an option trainops passes on"), ({"gres": "gpu:8 --wrap=x"}, "give one word"),
    ({"mem": "1G", "me": "2G"}, "is ambiguous"),
])
def test_an_ambiguous_unknown_or_unpassed_option_is_refused(tmp_path, options, why):
    refused(lambda: backend(tmp_path, sbatch_options=options), "sbatch_options.", why)


def test_transport_rest_refuses_sbatch_options_instead_of_dropping_them(spec, tmp_path):
    rest = backend(tmp_path, transport="rest", rest_url="http://head:6820", sbatch_options={"gres": "gpu:8"})
    refused(lambda: rest.render_request(spec, "bert-1"), "sbatch_options", "gres", "transport cli")
    assert not (tmp_path / "shared").exists()


# --- poll_seconds -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["nan", "-1", "inf", "0", "soon", float("nan"), -1, float("inf")])
def test_poll_seconds_that_no_wait_can_sleep_is_refused_before_anything(tmp_path, value):
    refused(lambda: backend(tmp_path, poll_seconds=value), "poll_seconds")


def test_poll_seconds_nan_is_refused_by_the_cli_before_submitting(spec, tmp_path):
    source = tmp_path / "job.yaml"
    source.write_text(f"name: bert\nentry_point: train.py\nsource_dir: {tmp_path}\ninstance_type: ml.c5.xlarge\n")
    done = subprocess.run([sys.executable, "-m", "trainops.cli", "run", str(source), "--backend", "slurm", "-o",
                           f"shared_dir={tmp_path / 'shared'}", "-o", "poll_seconds=nan"],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "SLURM_CONF": "/nonexistent"})
    assert done.returncode == 2 and "poll_seconds" in done.stderr, done.stdout + done.stderr
    assert not (tmp_path / "shared").exists()


# --- shared directories holding % or a letter that is not ASCII ---------------------------------------------------
def test_a_percent_in_the_shared_dir_is_written_so_sbatch_keeps_it(spec, tmp_path):
    shared = tmp_path / "a%jb"
    script = get_backend("slurm", options={"shared_dir": str(shared)}).render_request(spec, "bert-1")
    expected = f"{tmp_path}/a%%jb/jobs/bert-1/logs/batch-%j.log"
    assert f"#SBATCH --output={expected}" in script.splitlines()
    job = BatchJob(job_name="bert-1", job_dir=f"{shared}/jobs/bert-1", nodes=2, time_seconds=60, token="t")
    assert rest_job(job, {})["standard_output"] == expected


@pytest.mark.parametrize("odd", ["é-dir", "pct%41"])
def test_the_default_output_path_stays_inside_a_directory_named_with_any_letter(spec, tmp_path, odd):
    from trainops.backends.hostfs.artifacts import default_output_path, local_output_root

    workdir = tmp_path / odd
    job_dir = workdir / "jobs" / "bert-1"
    assert local_output_root(default_output_path(job_dir), job_dir) == (workdir / "output").resolve()
    rendered = get_backend("slurm", options={"shared_dir": str(workdir)}).dry_run(
        spec, "bert-1", get_backend("slurm").options())
    assert rendered["request"]["OutputDataConfig"]["S3OutputPath"] == f"file://{workdir.resolve()}/output"


def test_a_local_job_in_a_work_directory_named_with_a_non_ascii_letter_writes_its_model_inside(tmp_path):
    workdir = tmp_path / "wé%41"
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(
        "import os\nopen(os.path.join(os.environ['SM_MODEL_DIR'], 'm.txt'), 'w').write('1')\n")
    source = tmp_path / "job.yaml"
    source.write_text(f"name: tiny\nentry_point: train.py\nsource_dir: {tmp_path / 'src'}\n"
                      "instance_type: ml.c5.xlarge\nhealth_check: false\n")
    done = subprocess.run([sys.executable, "-m", "trainops.cli", "run", str(source), "--workdir", str(workdir),
                           "--job-name", "tiny-1"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (workdir / "output" / "tiny-1" / "output" / "model.tar.gz").is_file()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["job.yaml", "src", "wé%41"]


# --- checkpoint keys ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("key", ["..", "../x", "a/../../b", "/etc", ".hidden", "-rf", "a b"])
def test_a_checkpoint_key_is_one_safe_path_component_on_both_backends(tmp_path, key):
    refused(lambda: backend(tmp_path, checkpoint_key=key), "checkpoint_key")
    refused(lambda: get_backend("local", workdir=str(tmp_path / "state")).options({"checkpoint_key": key}),
            "checkpoint_key")


def test_resume_from_a_path_is_refused_and_creates_nothing_outside(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("pass\n")
    source = tmp_path / "job.yaml"
    source.write_text(f"name: tiny\nentry_point: train.py\nsource_dir: {tmp_path / 'src'}\n"
                      "instance_type: ml.c5.xlarge\nhealth_check: false\n")
    done = subprocess.run([sys.executable, "-m", "trainops.cli", "run", str(source), "--workdir",
                           str(tmp_path / "state"), "--resume-from", "../../escaped"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "checkpoint_key" in done.stderr, done.stdout + done.stderr
    assert not (tmp_path / "escaped").exists() and not (tmp_path.parent / "escaped").exists()


# --- the job's own records, once Slurm has forgotten the job ------------------------------------------------------
class Forgotten(Transport):
    def submit(self, script, script_path, job):  # pragma: no cover - not used here
        raise AssertionError

    def jobs(self):
        return []

    def cancel(self, job_id):  # pragma: no cover - not used here
        raise AssertionError


@pytest.mark.parametrize(("ended", "field"), [
    ({"slurm_state": "CANCELLED", "ended": "yesterday"}, "ended"),
    ({"slurm_state": 5}, "slurm_state"), ({"slurm_state": "NOT_A_STATE"}, "slurm_state"),
    ({"status": "Completed", "ended": [1]}, "ended"), ({"status": "Completed", "model_artifact": {"x": 1}},
                                                       "model_artifact"),
    ({"status": "Failed", "failure_reason": 3}, "failure_reason"), ({"status": 1}, "status"),
    ({"slurm_state": "TIMEOUT", "ended": float("nan")}, "ended"),
])
def test_a_wrong_typed_end_record_is_a_damaged_record_naming_its_field(tmp_path, ended, field):
    job_dir = tmp_path / "jobs" / "bert-1"
    job_dir.mkdir(parents=True)
    records.write(job_dir, records.JOB, {"job_name": "bert-1", "token": "abc", "user": "alice", "slurm_job_id": 7,
                                         "submitted": 990.0, "max_run": 600})
    (job_dir / records.ENDED).write_text(__import__("json").dumps(ended))
    text = refused(lambda: status.read(job_dir, "bert-1", Forgotten()), "ended.json is damaged", f"{field} is")
    assert "remove" in text
    assert "final" not in records.read(job_dir, records.JOB)  # nothing recorded from it


# --- the REST token file ------------------------------------------------------------------------------------------
def bounded(call, seconds: float = 60.0):
    """``call()``'s outcome from a thread, asserting it returned: a read that waits for a writer never does."""
    outcome: list = []

    def run() -> None:
        try:
            outcome.append(call())
        except BaseException as error:  # noqa: BLE001 - handed to the test
            outcome.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "the read waited (a FIFO with no writer blocks an open without O_NONBLOCK)"
    return outcome[0]


def test_a_rest_token_file_that_is_a_fifo_is_refused_without_waiting(tmp_path):
    fifo = tmp_path / "token"
    os.mkfifo(fifo)
    error = bounded(lambda: read_token(str(fifo), {}))
    assert isinstance(error, SpecError) and "rest_token_file" in str(error) and "FIFO" in str(error), error


def test_a_rest_token_file_may_be_a_link_to_the_token(tmp_path):
    (tmp_path / "real").write_text("SLURM_JWT=abc.def.ghi\n")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert read_token(str(tmp_path / "link"), {}) == "abc.def.ghi"


# --- what squeue prints: other users' bytes, and a machine with no Slurm ------------------------------------------
def fake_command(tmp_path: Path, name: str, stdout: bytes, code: int = 0, stderr: bytes = b"") -> dict[str, str]:
    """A PATH whose ``name`` prints ``stdout`` (bytes as they are) and exits ``code``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (tmp_path / f"{name}.out").write_bytes(stdout)
    (tmp_path / f"{name}.err").write_bytes(stderr)
    script = bin_dir / name
    script.write_text(f"#!/bin/sh\ncat '{tmp_path}/{name}.out'\ncat '{tmp_path}/{name}.err' >&2\nexit {code}\n")
    script.chmod(0o755)
    return {"PATH": f"{bin_dir}:/usr/bin:/bin"}


def line(*fields: bytes) -> bytes:
    return b"".join(field + b"\x1f" for field in fields) + b"\n"


MINE = line(b"7", b"alice", b"RUNNING", b"None", b"n[1-2]", b"n1", b"2026-12-07T02:59:27", b"2026-12-07T02:59:30",
            b"2026-12-07T03:59:30", b"0", b"trainops:abc", b"bert-1")


def test_squeues_answer_is_read_as_bytes_and_a_line_that_is_not_a_job_is_skipped(tmp_path):
    hostile = (line(b"8", b"mallory", b"PENDING", b"JobHeldUser", b"", b"", b"N/A", b"N/A", b"N/A", b"0",
                    b"c\xff", b"na\xffme") + b"9\x1fmallory\x1f|\x1fbroken \xfe\nline\x1f\n")
    transport = CommandTransport(environ=fake_command(tmp_path, "squeue", hostile + MINE))
    [job] = transport.named("alice", "bert-1")
    assert (job.job_id, job.state, job.nodes, job.comment, job.ended) == (7, "RUNNING", "n[1-2]", "trainops:abc", None)
    assert job.started is not None and job.started - job.submitted == 3


def test_squeues_own_settings_in_the_environment_change_no_look(tmp_path):
    environ = fake_command(tmp_path, "squeue", b"")
    script = tmp_path / "bin" / "squeue"  # prints the settings it was given, then the job
    script.write_text(f"#!/bin/sh\nprintf 'env %s %s\\n' \"$SLURM_TIME_FORMAT\" \"$SQUEUE_PARTITION\"\n"
                      f"cat '{tmp_path}/mine.out'\n")
    (tmp_path / "mine.out").write_bytes(MINE)
    transport = CommandTransport(environ={**environ, "SLURM_TIME_FORMAT": "relative", "SQUEUE_PARTITION": "other"})
    job = transport.job(7)
    assert job is not None and job.started is not None and job.comment == "trainops:abc"
    printed = subprocess.run([str(script)], env=transport._look_environ, capture_output=True, check=True).stdout
    assert printed.splitlines()[0] == b"env standard "


def test_an_id_held_by_a_job_whose_fields_cannot_be_read_is_not_this_job(tmp_path):
    transport = CommandTransport(environ=fake_command(tmp_path, "squeue", b"7\x1fmallory\x1f\xff\n\x1f\n"))
    job = transport.job(7)
    assert job is not None and job.user == "" and not status.owns(job, {"user": "alice", "token": "abc"}, "bert-1")


def test_an_id_slurm_does_not_know_is_a_forgotten_job(tmp_path):
    environ = fake_command(tmp_path, "squeue", b"", 1, b"slurm_load_jobs error: Invalid job id specified\n")
    assert CommandTransport(environ=environ).job(7) is None


def test_the_commands_never_get_slurm_jwt(tmp_path):
    transport = CommandTransport(environ={"PATH": "/usr/bin", "SLURM_JWT": "secret", "SLURM_CONF": "/c"})
    assert "SLURM_JWT" not in transport.environ and transport.environ["SLURM_CONF"] == "/c"


def test_a_job_id_is_only_this_jobs_with_its_user_name_and_token():
    record = {"user": "alice", "token": "abc"}
    mine = SlurmJob(job_id=7, name="bert-1", user="alice", state="RUNNING", comment="trainops:abc")
    assert status.owns(mine, record, "bert-1")
    for other in ({"user": "mallory"}, {"name": "other"}, {"comment": "trainops:xyz"}, {"comment": ""}):
        assert not status.owns(SlurmJob(**{**mine.__dict__, **other}), record, "bert-1")


@pytest.mark.skipif(shutil.which("sbatch") is None or os.path.exists("/etc/slurm/slurm.conf"),
                    reason="needs Slurm's commands and no slurm.conf on this machine")
def test_run_where_no_slurm_cluster_is_configured_says_so_and_what_to_do(tmp_path):
    (tmp_path / "train.py").write_text("pass\n")
    source = tmp_path / "job.yaml"
    source.write_text(f"name: bert\nentry_point: train.py\nsource_dir: {tmp_path}\ninstance_type: ml.c5.xlarge\n")
    environ = {key: value for key, value in os.environ.items() if key != "SLURM_CONF"}
    done = subprocess.run([sys.executable, "-m", "trainops.cli", "run", str(source), "--backend", "slurm", "-o",
                           f"shared_dir={tmp_path / 'shared'}"], capture_output=True, text=True, timeout=300,
                          env=environ)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "no Slurm cluster is configured on this machine" in done.stderr and "transport=rest" in done.stderr
    assert "check partition" not in done.stderr
    assert not (tmp_path / "shared" / "jobs" / "bert-1" / "slurm-job.json").exists()  # the name is free again


def test_an_sbatch_that_reached_no_controller_says_nothing_was_submitted_and_what_to_do(tmp_path):
    refusal = b"sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)\n"
    transport = CommandTransport(environ={**fake_command(tmp_path, "sbatch", b"", 1, refusal), "SLURM_CONF": "/c"})
    text = refused(lambda: transport.submit("", str(tmp_path / "job.sbatch"), {}), "transport",
                   "no Slurm controller answered", "nothing was submitted", "/c is its slurm.conf")
    assert "check partition" not in text
    timed_out = b"sbatch: error: Batch job submission failed: Socket timed out on send/recv operation\n"
    transport = CommandTransport(environ=fake_command(tmp_path, "sbatch", b"", 1, timed_out))
    with pytest.raises(SlurmUnreachable):  # it may have reached the controller: a look finds it by its token
        transport.submit("", str(tmp_path / "job.sbatch"), {})


def test_sbatch_gets_trainops_options_on_its_command_line_and_no_variable_that_would_move_the_job(tmp_path, spec):
    """The submitter's environment is input: each #SBATCH line also goes on sbatch's command line (which beats
    SBATCH_* variables), in the script's order, exactly; the variables no option undoes and an allocation's
    SLURM_* are left out of sbatch's environment, SLURM_CONF kept. The real cluster's side:
    test_slurm_shared_cluster.py::test_sbatch_and_slurm_variables_of_the_submitters_environment_move_nothing_of_the_job."""
    from trainops.backends.slurm.cli import directives, submit_environment
    from trainops.backends.slurm.script import batch_script

    job = BatchJob(job_name="bert-1", job_dir=str(tmp_path / "sh %j" / "jobs" / "bert-1"), nodes=2, time_seconds=600,
                   token="t" * 32, partition="train", extra=(("gres", "gpu:8"), ("mem-per-cpu", "1G")))
    script = batch_script(job)
    assert directives(script) == [line[len("#SBATCH "):] for line in script.splitlines() if line.startswith("#SBATCH ")]
    assert directives(script) == [f"--{name}" + (f"={value}" if value is not None else "")
                                  for name, value in job.options()]
    assert f"--output={tmp_path}/sh %%j/jobs/bert-1/logs/batch-%j.log" in directives(script)  # one argument, spaces kept
    environ = {"PATH": "/usr/bin", "SLURM_CONF": "/etc/slurm/slurm.conf", "SLURM_CPUS_PER_TASK": "4",
               "SLURM_JOB_ID": "7", "SLURM_JWT": "secret", "SBATCH_PARTITION": "gpu", "SBATCH_WAIT": "1",
               "SBATCH_ARRAY_INX": "0-3", "SBATCH_EXPORT": "NONE", "SBATCH_ERROR": "/tmp/e", "SQUEUE_FORMAT": "%i"}
    assert submit_environment(CommandTransport(environ).environ) == {
        "PATH": "/usr/bin", "SLURM_CONF": "/etc/slurm/slurm.conf", "SBATCH_PARTITION": "gpu", "SQUEUE_FORMAT": "%i"}
