"""The CLI's answers to unusable arguments (issue 15, item 13): exit 2 naming the argument, never an internal error."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from trainops.cli import main


def cli(*arguments: str) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main(list(arguments))
    return code, err.getvalue()


@pytest.fixture
def no_region(monkeypatch, tmp_path):
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
    monkeypatch.setenv("TRAINOPS_HOME", str(tmp_path / "home"))


@pytest.mark.parametrize("command", ["status", "logs", "stop"])
def test_an_unknown_name_says_where_it_looked_and_how_to_choose_another_backend(no_region, command, tmp_path):
    """No guessing "local, else SageMaker": the command looks on the backend it is given (the default one here)."""
    code, err = cli(command, "nosuch")
    assert code == 2 and "internal error" not in err
    assert (f"no job 'nosuch' on the local backend (looked in {tmp_path / 'home' / 'jobs'}); a job of another "
            "backend: --backend NAME (sagemaker") in err


def test_a_backend_that_needs_a_region_names_the_region_and_how_to_give_it(no_region):
    code, err = cli("status", "nosuch", "--backend", "sagemaker")
    assert code == 2 and "region: the sagemaker backend needs a region: give one with -o region=..." in err


@pytest.mark.parametrize("output, text", [("/", "must be a file name ending in .yaml"),
                                          ("{dir}", "must be a file name ending in .yaml"),
                                          ("{dir}.yaml", "is a directory"),
                                          ("{file}/x.yaml", "is a file, not a directory")])
def test_kfp_compile_refuses_an_output_it_could_not_write_before_compiling(tmp_path, output, text):
    from trainops.commands.kfp_commands import check_output
    from trainops.errors import SpecError

    (tmp_path / "d.yaml").mkdir()
    (tmp_path / "f").write_text("x")
    with pytest.raises(SpecError) as raised:
        check_output(output.format(dir=tmp_path / "d", file=tmp_path / "f"))
    assert raised.value.problems[0].path == "--output" and text in raised.value.problems[0].message
    check_output(str(tmp_path / "new" / "deeper" / "pipeline.yaml"))  # a directory to create is fine


def test_models_commands_refuse_a_registry_that_is_a_file(tmp_path):
    (tmp_path / "f").write_text("x")
    for arguments in (["models", "list"], ["models", "show", "digits"], ["models", "approve", "digits", "1"]):
        code, err = cli(*arguments, "--registry", str(tmp_path / "f"))
        assert code == 2 and "--registry" in err and "is a file, not a registry" in err, (arguments, err)


def test_a_state_directory_that_is_a_file_or_in_proc_is_refused(tmp_path):
    from trainops.backends.hostfs import paths
    from trainops.errors import SpecError

    (tmp_path / "f").write_text("x")
    for workdir, text in ((tmp_path / "f", "is a file"), (tmp_path / "f" / "sub", "is a file"),
                          ("/proc/self", "kernel file system"), ("/sys", "kernel file system")):
        with pytest.raises(SpecError, match=text):
            paths.jobs_root(workdir)
    assert paths.jobs_root(tmp_path / "new") == tmp_path / "new" / "jobs"  # not there yet: fine, nothing created
    assert paths.jobs_root("/dev/shm/trainops-state") == Path("/dev/shm/trainops-state/jobs")  # a real tmpfs
    assert not (tmp_path / "new").exists()


#: The `make run` venv in miniature: trainops with the AWS client and KFP not installed.
WITHOUT_OPTIONAL = """
import sys
class Missing:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in ("boto3", "botocore", "s3transfer", "kfp"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Missing())
from trainops.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize(("arguments", "text"), [
    (["status", "nosuch"], "no job 'nosuch' on the local backend (looked in {home}/jobs)"),
    (["logs", "nosuch"], "no job 'nosuch' on the local backend (looked in {home}/jobs)"),
    (["stop", "nosuch"], "no job 'nosuch' on the local backend (looked in {home}/jobs)"),
    (["status", "nosuch", "--backend", "sagemaker"], "needs 'boto3', which is not installed"),
    (["run", "examples/specs/smddp-p4d.yaml", "--backend", "sagemaker"], "needs 'boto3', which is not installed"),
    (["kfp", "compile", "examples/digits/pipeline.yaml", "-o", "{home}/x.yaml"],
     "needs 'kfp', which is not installed"),
    # issue 39: a local job reading S3 is refused when validated, not detached with exit 0 to fail later
    (["run", "examples/digits/train.yaml", "--no-wait"],
     "inputs.train: s3://trainops-example-data/digits/train/ is read through boto3, which is not installed"),
])
def test_a_command_whose_optional_package_is_missing_says_what_to_install(tmp_path, arguments, text):
    """`make run` installs neither boto3 nor kfp: a SageMaker or KFP command there exits 2 naming the extra to
    install, not with an internal error; a mistyped local job name says there is no such job."""
    import subprocess
    import sys

    home = tmp_path / "home"
    done = subprocess.run([sys.executable, "-c", WITHOUT_OPTIONAL, *[part.format(home=home) for part in arguments]],
                          capture_output=True, text=True, timeout=120, cwd=Path(__file__).resolve().parents[3],
                          env={**__import__("os").environ, "TRAINOPS_HOME": str(home)})
    assert done.returncode == 2 and "internal error" not in done.stderr, done.stderr
    assert text.format(home=home) in done.stderr
    if arguments[0] == "kfp" or "sagemaker" in arguments or "--no-wait" in arguments:
        assert "pip install 'trainops[" in done.stderr
    if "--no-wait" in arguments:
        assert not (home / "jobs").exists() or not any((home / "jobs").iterdir())  # nothing started
