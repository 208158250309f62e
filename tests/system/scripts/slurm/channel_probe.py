"""One host of a job started as SDK v3's SourceCode.command: reports each channel's files (and a file's text) as
the host sees them, with its arguments and hyperparameters, as one JSON line."""

import json
import os
import sys

channels = {}
for name in json.loads(os.environ["SM_CHANNELS"]):
    root = os.environ[f"SM_CHANNEL_{name.upper()}"]
    files = {}
    for directory, _, names in os.walk(root, followlinks=True):
        for file_name in names:
            path = os.path.join(directory, file_name)
            with open(path, "rb") as handle:
                files[os.path.relpath(path, root)] = handle.read().decode("latin-1")
    channels[name] = files
print("CHANNELS " + json.dumps({"host": os.environ["SM_CURRENT_HOST"], "node": os.environ.get("SLURMD_NODENAME"),
                                "cwd": os.getcwd(), "argv": sys.argv[1:], "hps": json.loads(os.environ["SM_HPS"]),
                                "channels": channels}), flush=True)
