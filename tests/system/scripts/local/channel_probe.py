"""Reports what the job sees of its channels: a real directory or a link, the data, and whether it can write there."""

import errno
import json
import os

report = {}
for name in ("train", "shared"):
    path = os.environ.get(f"SM_CHANNEL_{name.upper()}")
    if not path:
        continue
    entry = {"link": os.path.islink(path), "files": sorted(os.listdir(path))}
    try:
        with open(os.path.join(path, "written-by-the-job.txt"), "w") as handle:
            handle.write("the job wrote here")
        entry["write"] = "ok"
    except OSError as error:
        entry["write"] = "read-only" if error.errno == errno.EROFS else f"error {error.errno}"
    report[name] = entry
with open(os.path.join(os.environ["SM_MODEL_DIR"], "model.txt"), "w") as handle:
    handle.write("probe")
print("CHANNELS " + json.dumps(report, sort_keys=True), flush=True)
