"""A TensorFlow-free stand-in for the three calls a parameter server makes (tests only; TensorFlow is too heavy for
`make test`): ``tf.train.ClusterSpec``, ``tf.compat.v1.ConfigProto`` and ``tf.distribute.Server(...).join()``.

The server listens on its task's address from the cluster spec, as TensorFlow's does, and answers a line protocol
over TCP that stands for variable updates: ``ADD name amount`` (returns the new total), ``GET name`` and ``WHO``
(returns this process's pid, job, index, address, host and TF_CONFIG task as JSON). It serves until the process
is stopped.
"""

from __future__ import annotations

import json
import os
import socketserver
import threading
import types


class ClusterSpec:
    def __init__(self, cluster):
        self.cluster = {name: list(addresses) for name, addresses in cluster.items()}

    def job_tasks(self, job_name):
        return list(self.cluster[job_name])


class ConfigProto:
    def __init__(self, device_count=None):
        self.device_count = dict(device_count or {})


class Server:
    def __init__(self, cluster_spec, job_name, task_index, config=None):
        self.address = cluster_spec.job_tasks(job_name)[task_index]
        self.job_name, self.task_index = job_name, task_index
        self.values = {}
        self.lock = threading.Lock()
        host, port = self.address.rsplit(":", 1)
        server = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self):
                for line in self.rfile:
                    self.wfile.write((server.answer(line.decode().split()) + "\n").encode())

        socketserver.ThreadingTCPServer.allow_reuse_address = True
        self.tcp = socketserver.ThreadingTCPServer((host, int(port)), Handler)
        self.tcp.daemon_threads = True

    def answer(self, words):
        if words[:1] == ["WHO"]:
            return json.dumps({"pid": os.getpid(), "job": self.job_name, "index": self.task_index,
                               "address": self.address, "host": os.environ.get("SM_CURRENT_HOST"),
                               "task": json.loads(os.environ.get("TF_CONFIG", "{}")).get("task")})
        with self.lock:
            if words[:1] == ["ADD"] and len(words) == 3:
                self.values[words[1]] = self.values.get(words[1], 0) + int(words[2])
                return str(self.values[words[1]])
            if words[:1] == ["GET"] and len(words) == 2:
                return str(self.values.get(words[1], 0))
        return "ERROR"

    def join(self):
        self.tcp.serve_forever()


train = types.SimpleNamespace(ClusterSpec=ClusterSpec)
compat = types.SimpleNamespace(v1=types.SimpleNamespace(ConfigProto=ConfigProto))
distribute = types.SimpleNamespace(Server=Server)
