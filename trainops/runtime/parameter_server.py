"""A TensorFlow parameter server: the process every host of a parameter-server job runs beside its worker.

AWS's TensorFlow toolkit starts one on each host of a multi-host ``parameter_server`` job, before the worker: a
``tf.distribute.Server`` for the ``ps`` task whose index is the host's place in the cluster, with GPUs hidden (two
TensorFlow processes must not share a GPU), serving until the job ends. The launcher
(:mod:`trainops.runtime.execute`) starts this module with ``TF_CONFIG`` naming the ``ps`` task and stops it once the
host's worker is done (and, off the master, once the master's worker has gone).

Run as ``python -m trainops.runtime.parameter_server``. TensorFlow is imported here, in the image that has it; the
rest of the runtime never imports it.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from typing import Any

USAGE = "usage: TF_CONFIG='{\"cluster\": {...}, \"task\": {\"type\": \"ps\", \"index\": N}}' " \
        "python -m trainops.runtime.parameter_server"


class ParameterServerError(ValueError):
    """TF_CONFIG does not describe a parameter-server task; the message says what is wrong."""


def server_arguments(environ: Mapping[str, str]) -> tuple[dict[str, list[str]], int]:
    """The cluster (job name -> addresses) and this server's task index, from ``TF_CONFIG``."""
    text = environ.get("TF_CONFIG")
    if not text:
        raise ParameterServerError("TF_CONFIG is not set: the launcher gives the parameter server its cluster")
    try:
        config: Any = json.loads(text)
    except ValueError:
        raise ParameterServerError(f"TF_CONFIG is not JSON: {text[:200]!r}") from None
    cluster = config.get("cluster") if isinstance(config, dict) else None
    task = config.get("task") if isinstance(config, dict) else None
    if not isinstance(cluster, dict) or not isinstance(cluster.get("ps"), list) or not cluster["ps"]:
        raise ParameterServerError("TF_CONFIG: cluster.ps must list the parameter servers' addresses")
    if not isinstance(task, dict) or task.get("type") != "ps":
        raise ParameterServerError(f"TF_CONFIG: task must be {{'type': 'ps', 'index': N}}, got {task!r}")
    index = task.get("index")
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(cluster["ps"]):
        raise ParameterServerError(f"TF_CONFIG: task.index {index!r} is not one of the {len(cluster['ps'])} "
                                   "parameter servers")
    return {str(name): list(addresses) for name, addresses in cluster.items()}, index


def serve(cluster: dict[str, list[str]], index: int) -> None:
    """Start the ``ps`` task's server on the CPU and serve until the process is stopped (the toolkit's server)."""
    import tensorflow as tf

    server = tf.distribute.Server(tf.train.ClusterSpec(cluster), job_name="ps", task_index=index,
                                  config=tf.compat.v1.ConfigProto(device_count={"GPU": 0}))
    print(f"trainops: parameter server ps:{index} serving at {cluster['ps'][index]}", file=sys.stderr, flush=True)
    server.join()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv:
        print(USAGE, file=sys.stderr)
        return 2
    try:
        cluster, index = server_arguments(os.environ)
    except ParameterServerError as error:
        print(f"trainops: parameter server: {error}", file=sys.stderr)
        return 2
    serve(cluster, index)
    return 0


if __name__ == "__main__":
    sys.exit(main())
