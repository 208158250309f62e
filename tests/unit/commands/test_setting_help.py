"""A backend's settings as a user meets them (issue 47, item 3): `trainops backends` gives each a line of help and
its default; a `-o` key the backend does not take gets a "did you mean" and a list without the settings that take a
Python object (client_factory, on_job); a spec's region overriding the backend's is said, on stderr."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from trainops.backends import backend_class
from trainops.backends.setting_help import describe, docstring_args
from trainops.cli import main


def cli(*arguments: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(arguments))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(autouse=True)
def own_home(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINOPS_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TRAINOPS_BACKENDS", str(tmp_path / "backends.yaml"))


@pytest.mark.parametrize("name", ["local", "sagemaker", "slurm"])
def test_every_setting_of_a_built_in_backend_has_help_and_no_internal_one_is_listed(name):
    rows = describe(backend_class(name))
    assert rows and all(row.help and row.help != "(no help declared)" for row in rows), rows
    assert not {"client_factory", "on_job"} & {row.name for row in rows}


def test_backends_lists_each_setting_with_its_type_default_and_help():
    code, out, _ = cli("backends")
    assert code == 0
    assert ("    processes_per_host (int, default: the spec's, else the GPUs, else one): ranks per emulated host"
            in out)
    assert "    workdir (str, default: $TRAINOPS_HOME): where job state lives (<workdir>/jobs/<name>)" in out
    assert "    preflight (bool, default: true): check FSx, VPC and capacity settings" in out
    assert "    python (str, default: python3): the interpreter on the nodes that runs the ranks" in out
    assert "client_factory" not in out and "on_job" not in out
    code, out, _ = cli("backends", "--json")
    rows = {row["name"]: row for row in json.loads(out)}
    assert rows["sagemaker"]["settings"]["preflight"] == "bool"
    assert rows["sagemaker"]["setting_help"]["preflight"] == {
        "help": "check FSx, VPC and capacity settings with AWS calls before the job is created", "default": "true"}


def test_an_args_entry_may_name_several_settings_and_continue_on_the_next_lines():
    class Example:
        """An example.

        Args:
            partition, account: as sbatch's options of those names.
            python: the interpreter on the nodes
                (default ``python3``).
        Returns nothing.
        """

    assert docstring_args(Example) == {"partition": "as sbatch's options of those names.",
                                       "account": "as sbatch's options of those names.",
                                       "python": "the interpreter on the nodes (default ``python3``)."}


@pytest.mark.parametrize(("given", "meant"), [("worKdir", "workdir"), ("procs_per_host", "processes_per_host"),
                                              ("regoin", "region")])
def test_a_mistyped_option_gets_did_you_mean_and_no_internal_setting_is_offered(given, meant):
    code, _, err = cli("status", "some-job", "-o", f"{given}=x")
    assert code == 2
    assert f"{given}: is not a setting of the local backend (its settings: channel_overrides, checkpoint_key, " \
           "image_python, launcher, processes_per_host, region, registry_dir, workdir); " \
           f"did you mean '{meant}'?" in err
    assert "client_factory" not in err and "on_job" not in err


def test_an_option_like_no_setting_gets_no_guess():
    code, _, err = cli("status", "some-job", "-o", "colour=blue")
    assert code == 2 and "colour: is not a setting of the local backend" in err and "did you mean" not in err


def test_a_setting_that_takes_a_python_object_is_refused_as_text_on_every_backend():
    for backend in ("local", "sagemaker"):
        code, _, err = cli("status", "some-job", "--backend", backend, "-o", "client_factory=boto3",
                           "-o", "region=us-east-1")
        assert code == 2 and "client_factory: 'boto3' cannot be given as text: this setting takes a Python " \
                             "object" in err, err


def test_a_named_backends_region_that_the_spec_overrides_is_said_on_stderr(tmp_path, monkeypatch):
    (tmp_path / "backends.yaml").write_text("gpu-eu:\n  backend: sagemaker\n  options: {region: eu-west-1}\n")
    code, out, err = cli("render", "examples/specs/smddp-p4d.yaml", "--backend", "gpu-eu")
    assert code == 0, err
    request = json.loads(out)  # stdout stays the request alone
    assert "us-east-1" in request["AlgorithmSpecification"]["TrainingImage"]
    assert ("[trainops] region: the job runs in the spec's region us-east-1, not the backend gpu-eu's eu-west-1 "
            "(a spec's region wins over the backend's); remove region: from the spec to run in eu-west-1") in err
