"""A fault injector in front of an HTTP server (the moto server): an HTTP proxy on 127.0.0.1 that passes every
request through, except those a test chooses, which get a fault instead.

The faults are what a status look meets in production: SageMaker's 500 (``InternalFailure``), its throttling answer
(400 ``ThrottlingException``), a connection closed without an answer, and no listener at all (connection refused:
`refuse` closes the listening socket and every open connection; `accept` listens again on the same port). A test
queues faults for one AWS operation (``X-Amz-Target``, e.g. ``DescribeTrainingJob``), to start once another one has
passed (``after="CreateTrainingJob"``: the job exists, its wait begins), and is told when the window ended
(``on_end``). Every operation that reached the server is recorded, so a test can say that nothing was stopped or
created twice. Set ``AWS_MAX_ATTEMPTS=1`` for the clients: botocore's own retries would otherwise absorb each fault
(with backoff) before the look sees it.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

ANSWERS = {
    "500": (500, {"__type": "InternalFailure", "message": "We encountered an internal error. Please try again."}),
    "throttle": (400, {"__type": "ThrottlingException", "message": "Rate exceeded"}),
}
KINDS = ("500", "throttle", "close", "refuse")
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "upgrade", "te", "trailer"}


class FaultProxy:
    """``FaultProxy(upstream).start()``; ``endpoint`` is where clients go; ``stop()`` at the end."""

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.port = 0
        self.endpoint = ""
        self.operations: list[str] = []  # every operation that reached the server, in order
        self.faulted: list[tuple[str, str]] = []  # (operation, fault) given instead
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._connections: set[socket.socket] = set()
        self._plan: dict[str, object] = {}
        self._hooks: dict[str, Callable[[dict], None]] = {}

    # --- the window ------------------------------------------------------------------------------------------
    def fault(self, operation: str, faults: list[str] | str, *, after: str | None = None,
              on_end: Callable[[], None] | None = None) -> None:
        """Answer the next requests of ``operation`` with ``faults`` in turn (a list), or with one fault for ever (a
        string), starting once ``after`` has passed (None: now); ``on_end`` is called when the list is used up
        (a ``"refuse"`` in it closes the listener, and the window ends when the test calls `accept`)."""
        for kind in [faults] if isinstance(faults, str) else faults:
            assert kind in KINDS, kind
        with self._lock:
            self._plan = {"operation": operation, "faults": faults if isinstance(faults, str) else list(faults),
                          "armed": after is None, "after": after, "on_end": on_end}

    def on(self, operation: str, hook: Callable[[dict], None]) -> None:
        """Call ``hook(request)`` (the JSON request) when ``operation`` has passed, before its answer is sent."""
        self._hooks[operation] = hook

    def clear(self) -> None:
        """No fault, no hook, nothing recorded."""
        with self._lock:
            self._plan = {}
            self._hooks.clear()
            self.operations.clear()
            self.faulted.clear()

    def count(self, operation: str) -> int:
        return self.operations.count(operation)

    def _next_fault(self, operation: str) -> str | None:
        with self._lock:
            plan = self._plan
            if not plan or not plan["armed"] or plan["operation"] != operation:
                return None
            faults = plan["faults"]
            if isinstance(faults, str):
                return faults
            assert isinstance(faults, list)
            if not faults:
                return None
            kind = faults.pop(0)
            if not faults and kind != "refuse" and plan["on_end"] is not None:
                plan["ending"] = True
            return str(kind)

    def _passed(self, operation: str) -> None:
        with self._lock:
            self.operations.append(operation)
            if self._plan and not self._plan["armed"] and self._plan["after"] == operation:
                self._plan["armed"] = True

    def _after_fault(self) -> None:
        with self._lock:
            ending = self._plan.pop("ending", False) if self._plan else False
            on_end = self._plan.get("on_end") if self._plan else None
        if ending and callable(on_end):
            on_end()

    # --- the listener ----------------------------------------------------------------------------------------
    def start(self) -> FaultProxy:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                with proxy._lock:
                    proxy._connections.add(self.connection)

            def finish(self) -> None:
                with proxy._lock:
                    proxy._connections.discard(self.connection)
                try:
                    super().finish()
                except OSError:
                    pass

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
                pass

            def _any(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                operation = (self.headers.get("X-Amz-Target") or "").rpartition(".")[2] or self.command
                kind = proxy._next_fault(operation)
                if kind is None:
                    self._forward(body, operation)
                    return
                proxy.faulted.append((operation, kind))
                if kind in ("close", "refuse"):
                    if kind == "refuse":
                        proxy.refuse()  # this connection too: the look that asked gets no answer either
                    self.close_connection = True
                    try:
                        self.connection.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                else:
                    status, answer = ANSWERS[kind]
                    data = json.dumps(answer).encode()
                    self.send_response(status)
                    self.send_header("Content-Type", "application/x-amz-json-1.1")
                    self.send_header("x-amzn-RequestId", "fault-proxy")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                proxy._after_fault()

            def _forward(self, body: bytes, operation: str) -> None:
                upstream = http.client.HTTPConnection(*proxy.upstream, timeout=60)
                headers = {key: value for key, value in self.headers.items() if key.lower() not in HOP_BY_HOP}
                upstream.request(self.command, self.path, body=body, headers=headers)
                answer = upstream.getresponse()
                data = answer.read()
                upstream.close()
                proxy._passed(operation)
                hook = proxy._hooks.get(operation)
                if hook is not None:
                    hook(json.loads(body or b"{}"))
                self.send_response(answer.status, answer.reason)
                for key, value in answer.getheaders():
                    if key.lower() not in HOP_BY_HOP and key.lower() != "content-length":
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _any  # noqa: N815 - http.server's names

        self._handler = Handler
        self._listen()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        return self

    def _listen(self) -> None:
        server = ThreadingHTTPServer(("127.0.0.1", self.port), self._handler)
        server.daemon_threads = True
        self.port = server.server_address[1]
        self._server = server
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def refuse(self) -> None:
        """No listener any more (a connection is refused), and every open connection closed."""
        with self._lock:
            server, self._server = self._server, None
            connections = list(self._connections)
        if server is not None:
            server.shutdown()  # serve_forever runs in a thread of its own, never a handler's
            server.server_close()
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def accept(self) -> None:
        """Listen again on the same port (the end of a refusal); the window's ``on_end`` is called first."""
        with self._lock:
            on_end = self._plan.get("on_end") if self._plan else None
            self._plan = {}
        if callable(on_end):
            on_end()
        if self._server is None:
            self._listen()

    def stop(self) -> None:
        self.refuse()
