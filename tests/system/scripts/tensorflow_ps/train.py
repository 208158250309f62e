"""A TensorFlow-free parameter-server training script (tests only): reads TF_CONFIG as a TensorFlow job does, pushes
an update to every parameter server of the cluster, waits until every worker's update has reached every one of them,
and records what it saw. The master listens on its own address while it runs, as TensorFlow's master server does."""

import json
import os
import socket
import sys
import time


def ask(address, line, attempts=300):
    host, port = address.rsplit(":", 1)
    for _ in range(attempts):
        try:
            with socket.create_connection((host, int(port)), timeout=5) as connection:
                connection.sendall((line + "\n").encode())
                return connection.makefile().readline().strip()
        except OSError:
            time.sleep(0.1)  # the parameter server of another host may still be starting
    raise SystemExit(f"parameter server {address} did not answer {line!r}")


def wait_for(addresses, name, total):
    for _ in range(600):
        if all(int(ask(address, f"GET {name}")) >= total for address in addresses):
            return
        time.sleep(0.1)
    raise SystemExit(f"{name} never reached {total} on every parameter server")


config = json.loads(os.environ["TF_CONFIG"])
cluster, task = config["cluster"], config["task"]
workers = len(cluster["master"]) + len(cluster.get("worker", []))
own = cluster[task["type"]][task["index"]]
listener = None
if task["type"] == "master":
    host, port = own.rsplit(":", 1)
    listener = socket.create_server((host, int(port)))
servers = [json.loads(ask(address, "WHO")) for address in cluster["ps"]]
for address in cluster["ps"]:
    ask(address, "ADD steps 1")
wait_for(cluster["ps"], "steps", workers)  # every worker's update is on every parameter server
ask(cluster["ps"][0], "ADD done 1")
if task["type"] == "master":
    wait_for(cluster["ps"][:1], "done", workers)  # the others are done with the parameter servers
result = {"task": task, "environment": config.get("environment"), "host": os.environ.get("SM_CURRENT_HOST"),
          "pid": os.getpid(), "parameter_servers": servers,
          "steps": [int(ask(address, "GET steps")) for address in cluster["ps"]]}
print("RESULT " + json.dumps(result), flush=True)
with open(os.path.join(os.environ["SM_MODEL_DIR"], f"result-{task['type']}-{task['index']}.json"), "w") as handle:
    json.dump(result, handle)
sys.exit(0)
