"""An AWS that cannot be reached is a cause and its fix, exit 2, never `internal error` (issue 47, item 3): the
`trainops` command as a user runs it, in a subprocess with an environment of its own (no AWS_* variable but the
ones a case sets, a HOME without ~/.aws), against the SageMaker backend.

- no credentials anywhere: the ways to give them (and the moto server for trying without an account); a profile
  AWS_PROFILE names that does not exist;
- credentials AWS refuses (a moto-free stand-in: an endpoint that answers 403 InvalidClientTokenId);
- an endpoint that does not answer (a closed port on 127.0.0.1; AWS_MAX_ATTEMPTS=1 bounds botocore's retries so the
  case is quick): which setting chose it and what to check.
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
    done = trainops(tmp_path, *command, AWS_ENDPOINT_URL=endpoint, AWS_ACCESS_KEY_ID="testing",
                    AWS_SECRET_ACCESS_KEY="testing", AWS_MAX_ATTEMPTS="1")
    assert_cause_and_fix(done, "AWS endpoint: could not be reached", f"AWS_ENDPOINT_URL={endpoint}",
                         "check that address")


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
