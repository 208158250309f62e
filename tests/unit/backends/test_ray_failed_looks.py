"""A look at a Ray job that fails without saying anything about the job is a failed look (`is_failed_look`): the
kit's wait looks again and never stops or fails the job for it. Real servers on this machine's loopback: one that
refuses connections, one whose every answer is a 500."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from trainops.backends.kit import LookFailed, is_failed_look
from trainops.backends.ray.jobs_api import JobsApi


def closed_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])  # closed again when the block ends: nothing listens there


class Failing(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.send_response(500)
        self.end_headers()
        self.wfile.write(b"internal error")

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def failing_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Failing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_refused_connection_is_a_failed_look():
    with pytest.raises(LookFailed) as raised:
        JobsApi(f"http://127.0.0.1:{closed_port()}").info("bert-1")
    assert is_failed_look(raised.value) and "did not answer" in str(raised.value)


def test_a_server_error_is_a_failed_look(failing_server):
    with pytest.raises(Exception) as raised:
        JobsApi(failing_server).info("bert-1")
    assert is_failed_look(raised.value), repr(raised.value)


class FailingJobs(Failing):
    """A Jobs API that answers its version (the client is made) and fails every job's call."""

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path.startswith("/api/version"):
            body = b'{"version": "4", "ray_version": "2.40.0", "ray_commit": "x", "session_name": "s"}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            super().do_GET()

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        super().do_GET()


def test_a_server_error_on_stop_or_logs_is_a_failed_look():
    server = ThreadingHTTPServer(("127.0.0.1", 0), FailingJobs)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        api = JobsApi(f"http://127.0.0.1:{server.server_address[1]}")
        for call in (api.stop, api.logs):
            with pytest.raises(Exception) as raised:
                call("bert-1")
            assert is_failed_look(raised.value), (call, repr(raised.value))
    finally:
        server.shutdown()
        server.server_close()
