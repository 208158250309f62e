"""An AWS that cannot be reached is a cause and its fix, exit 2, never `internal error` (issue 47, item 3): the
`trainops` command as a user runs it, in a subprocess with an environment of its own (no AWS_* variable but the
ones a case sets, a HOME without ~/.aws), against the SageMaker backend.

- no credentials anywhere: the ways to give them (and the moto server for trying without an account); a profile
  AWS_PROFILE names that does not exist;
- credentials AWS refuses (a moto-free stand-in: an endpoint that answers 403 InvalidClientTokenId);
- an endpoint that does not answer (a closed port on 127.0.0.1; AWS_MAX_ATTEMPTS=1 bounds botocore's retries so the
  case is quick): which setting chose it and what to check, said at once while botocore retries, and again when
  run's look before it creates gives up.
Both the first call of a run (the re-attach look, before anything is created) and a plain `status` are covered.
"""

from __future__ import annotations

import http.server
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SPEC = ROOT / "examples" / "specs" / "smddp-p4d.yaml"


def closed_port() -> int:
    """A port of 127.0.0.1 nothing listens on (bound, then released: connections to it are refused)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def trainops(tmp_path: Path, *arguments: str, **environment: str) -> subprocess.CompletedProcess[str]:
    home = tmp_path / "home"  # no ~/.aws in it
    home.mkdir(exist_ok=True)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "TRAINOPS_HOME": str(tmp_path / "t"),
           # no instance metadata service to wait for: the credential chain ends at once on a machine off AWS
           "AWS_EC2_METADATA_DISABLED": "true", "AWS_REGION": "us-east-1", **environment,
           **{name: os.environ[name] for name in ("PYTHONPATH",) if name in os.environ}}
    return subprocess.run([sys.executable, "-m", "trainops.cli", *arguments], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)


def assert_cause_and_fix(done: subprocess.CompletedProcess[str], *wanted: str) -> None:
    assert done.returncode == 2, done.stdout + done.stderr
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    for text in wanted:
        assert text in done.stderr, done.stderr


@pytest.mark.parametrize("command", [["run", str(SPEC), "--backend", "sagemaker", "--no-wait"],
                                     ["status", "some-job", "--backend", "sagemaker"]])
def test_no_credentials_says_how_to_give_them(tmp_path, command):
    done = trainops(tmp_path, *command)
    assert_cause_and_fix(done, "AWS credentials: none usable on this machine", "AWS_PROFILE",
                         "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY", "aws sso login", "moto server")


def test_a_profile_that_does_not_exist_is_named_with_the_fix(tmp_path):
    done = trainops(tmp_path, "status", "some-job", "--backend", "sagemaker", AWS_PROFILE="nope")
    assert_cause_and_fix(done, "AWS profile: The config profile (nope) could not be found",
                         "aws configure --profile NAME", "unset AWS_PROFILE")


@pytest.mark.parametrize("command", [["run", str(SPEC), "--backend", "sagemaker", "--no-wait"],
                                     ["status", "some-job", "--backend", "sagemaker"]])
def test_an_endpoint_that_does_not_answer_names_the_setting_that_chose_it(tmp_path, command):
    endpoint = f"http://127.0.0.1:{closed_port()}"
    # run's look before it creates is a look like a wait's (looked again, given up after both bounds): one look here
    done = trainops(tmp_path, *command, AWS_ENDPOINT_URL=endpoint, AWS_ACCESS_KEY_ID="testing",
                    AWS_SECRET_ACCESS_KEY="testing", AWS_MAX_ATTEMPTS="1", TRAINOPS_FAILED_LOOKS_COUNT="1",
                    TRAINOPS_FAILED_LOOKS_SECONDS="0")
    assert_cause_and_fix(done, "AWS endpoint: could not be reached", f"AWS_ENDPOINT_URL={endpoint}",
                         "check that address")
    if command[0] == "run":
        assert "(whether it exists, before creating it): 1 look in a row failed" in done.stderr, done.stderr


class RefusingHandler(http.server.BaseHTTPRequestHandler):
    """AWS's answer to an unknown access key, for every request."""

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = (b'{"__type": "UnrecognizedClientException", '
                b'"message": "The security token included in the request is invalid."}')
        self.send_response(400)
        self.send_header("Content-Type", "application/x-amz-json-1.1")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_credentials_aws_refuses_are_said_to_be_refused(tmp_path):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), RefusingHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        done = trainops(tmp_path, "status", "some-job", "--backend", "sagemaker",
                        AWS_ENDPOINT_URL=f"http://127.0.0.1:{server.server_address[1]}",
                        AWS_ACCESS_KEY_ID="AKIAUNKNOWN", AWS_SECRET_ACCESS_KEY="wrong", AWS_MAX_ATTEMPTS="1")
    finally:
        server.shutdown()
        server.server_close()
    assert_cause_and_fix(done, "AWS credentials: refused by AWS (UnrecognizedClientException", "renew them")


def test_an_endpoint_that_does_not_answer_is_said_at_once_while_botocores_default_retries_go_on(tmp_path):
    """With boto3's settings as a user has them (trainops' adaptive policy, 10 retries with backoff: about 20 s
    against a closed port), the first refused call is said on stderr at once, while botocore still retries; the
    retries are not switched off (the note names them, and the command is still running when it is said)."""
    home = tmp_path / "home"
    home.mkdir()
    endpoint = f"http://127.0.0.1:{closed_port()}"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "TRAINOPS_HOME": str(tmp_path / "t"),
           "AWS_EC2_METADATA_DISABLED": "true", "AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL": endpoint,
           "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
           **{name: os.environ[name] for name in ("PYTHONPATH",) if name in os.environ}}
    process = subprocess.Popen([sys.executable, "-m", "trainops.cli", "status", "some-job", "--backend", "sagemaker"],
                               env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        first = process.stderr.readline()  # blocks until the first line: the condition this test waits on
        still_retrying = process.poll() is None
    finally:
        process.kill()
        process.wait(timeout=60)
    assert first.startswith(f"[trainops] AWS endpoint {endpoint} did not answer (EndpointConnectionError"), first
    assert "botocore tries again, up to 11 attempts with backoff" in first, first
    assert still_retrying, "the note came only once botocore had given up"


def test_the_note_comes_before_the_cause_and_fix_and_not_when_no_retry_follows(tmp_path):
    endpoint = f"http://127.0.0.1:{closed_port()}"
    keys = {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    retried = trainops(tmp_path, "status", "some-job", "--backend", "sagemaker", AWS_MAX_ATTEMPTS="2", **keys)
    assert_cause_and_fix(retried, "AWS endpoint: could not be reached")
    lines = retried.stderr.splitlines()
    assert len(lines) == 2 and "botocore tries again, up to 2 attempts" in lines[0], retried.stderr
    assert lines[1].startswith("trainops: AWS endpoint: could not be reached"), retried.stderr
    once = trainops(tmp_path, "status", "some-job", "--backend", "sagemaker", AWS_MAX_ATTEMPTS="1", **keys)
    assert_cause_and_fix(once, "AWS endpoint: could not be reached")
    assert "tries again" not in once.stderr, once.stderr
