"""The ray backend passes the backend conformance suite (`trainops.backends.testing`) on the real test cluster
(`support.ray_cluster`): each job one Ray job through the Jobs API, followed by the kit's wait.

The suite calls the backend in this process, which is outside the cluster's network namespace, where the Jobs API
answers alone. A relay bridges the two: a listening socket made here (this machine's loopback) is handed to a process
started inside the namespace (``nsenter --net``), which accepts on it and connects each connection to the Jobs API
there. A socket keeps the namespace it was made in, so no port of the cluster is opened to the machine's network: the
backend reaches the Jobs API as an Airflow worker reaches a cluster's dashboard, through an address of its own."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap

import pytest

from trainops.backends import get_backend
from trainops.backends.testing import Conformance, Harness

pytestmark = [pytest.mark.system, pytest.mark.timeout(900)]

RELAY = textwrap.dedent("""
    import socket, sys, threading

    listener = socket.socket(fileno=int(sys.argv[1]))  # made outside the namespace: it listens there
    target = ("127.0.0.1", int(sys.argv[2]))  # the Jobs API, inside the namespace

    def pipe(source, sink):
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                try:
                    end.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    while True:
        client, _ = listener.accept()
        try:
            server = socket.create_connection(target)
        except OSError:
            client.close()
            continue
        threading.Thread(target=pipe, args=(client, server), daemon=True).start()
        threading.Thread(target=pipe, args=(server, client), daemon=True).start()
""")


@pytest.fixture(scope="module")
def jobs_api(ray_cluster):
    """The cluster's Jobs API as this process reaches it: ``http://127.0.0.1:PORT`` of the relay."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    port = int(ray_cluster.address.rsplit(":", 1)[1])
    relay = subprocess.Popen(ray_cluster.inside([sys.executable, "-c", RELAY, str(listener.fileno()), str(port)]),
                             pass_fds=(listener.fileno(),))
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        relay.terminate()
        relay.wait(timeout=30)
        listener.close()


class TestRayConformance(Conformance):
    @pytest.fixture(scope="class")
    def harness(self, jobs_api, tmp_path_factory) -> Harness:
        backend = get_backend("ray", address=jobs_api, poll_seconds=0.5)
        return Harness(backend, tmp_path_factory.mktemp("ray-code"), options={"gpus_per_host": 0},
                       bad_options={"colour": "blue"}, instance_type="ml.c5.xlarge",
                       spec_fields={"instance_count": 1,  # the model goes to a directory every node sees
                                    "output_path": tmp_path_factory.mktemp("ray-output").as_uri()},
                       limit=300.0)
