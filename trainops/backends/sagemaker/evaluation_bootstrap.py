"""The script a SageMaker evaluation (processing job) starts: it turns the processing job's layout into the
evaluation contract (docs/contracts.md section 6), so the user's script is the same file locally and on SageMaker."""

from trainops.backends.local.model_archive import DEFAULT_LIMIT_BYTES, LIMIT_VARIABLE, MAX_MEMBERS

#: The name the bootstrap has in the code prefix of a SageMaker evaluation.
BOOTSTRAP_NAME = "trainops_evaluate_bootstrap.py"

# The script the SageMaker processing job starts. The processing backend hands the model over as an unextracted
# model.tar.gz and passes --model-dir/--test-dir/--output-dir; this bridge turns that into the evaluation contract
# (extracted model, SM_CHANNEL_*, SM_OUTPUT_DATA_DIR, TRAINOPS_EVALUATION_DIR, hyperparameters as --key value), so the
# user's script is the same file locally and on SageMaker. Standard library only: it runs in any image.
_BOOTSTRAP_TEMPLATE = '''\
"""trainops evaluation bootstrap: sets up the evaluation contract, then runs the user's script."""
import errno
import json
import os
import runpy
import shutil
import sys
import tarfile

DIRECTORY_OPTIONS = ("--model-dir", "--test-dir", "--output-dir")
LIMIT_VARIABLE = "@LIMIT_VARIABLE@"
DEFAULT_LIMIT_BYTES = @DEFAULT_LIMIT_BYTES@
MAX_MEMBERS = @MAX_MEMBERS@


def size_limit():
    text = os.environ.get(LIMIT_VARIABLE, "").strip()
    if not text:
        return DEFAULT_LIMIT_BYTES
    if not text.isdigit() or int(text) <= 0:
        raise SystemExit("%s=%r is not a positive number of bytes" % (LIMIT_VARIABLE, text))
    return int(text)


def human(count):
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return ("%d %s" % (count, unit)) if unit == "bytes" else ("%.1f %s" % (count, unit))
        count /= 1024.0


def check_members(members, root):
    """Refuse before anything is written: names outside the directory, links (a chain of them defeats realpath,
    CVE-2025-4517, so none is extracted), devices, sparse files, and more bytes than the limit or the free space."""
    if len(members) > MAX_MEMBERS:
        raise SystemExit("model.tar.gz has %d members, more than %d; refusing it" % (len(members), MAX_MEMBERS))
    total = 0
    for member in members:
        target = os.path.realpath(os.path.join(root, member.name))
        if os.path.isabs(member.name) or os.path.commonpath([root, target]) != root:
            raise SystemExit("model.tar.gz member %r would land outside the model directory" % member.name)
        if not (member.isreg() or member.isdir()) or member.issparse():
            raise SystemExit("model.tar.gz member %r is a link, device, pipe or sparse file; model archives are "
                             "extracted with regular files and directories only" % member.name)
        total += member.size
    limit = size_limit()
    if total > limit:
        raise SystemExit("model.tar.gz expands to %s, more than the %s limit; set %s (bytes) in the evaluation's "
                         "environment to allow more" % (human(total), human(limit), LIMIT_VARIABLE))
    free = shutil.disk_usage(root).free
    if total > free:
        raise SystemExit("model.tar.gz expands to %s, more than the %s free under %s; give the processing job a "
                         "larger volume" % (human(total), human(free), root))


def extract(archive, destination):
    os.makedirs(destination, exist_ok=True)
    root = os.path.realpath(destination)
    with tarfile.open(archive, "r:*") as bundle:
        members = bundle.getmembers()
        check_members(members, root)
        try:
            if hasattr(tarfile, "data_filter"):
                bundle.extractall(root, members=members, filter="data")
            else:
                bundle.extractall(root, members=members)
        except OSError as error:
            # Nothing half-extracted is left for the script to read.
            shutil.rmtree(root, ignore_errors=True)
            if error.errno == errno.ENOSPC:
                raise SystemExit("the disk filled while extracting model.tar.gz under %s; give the processing job "
                                 "a larger volume" % root)
            raise
    return root


def main():
    arguments = sys.argv[1:]
    while len(arguments) >= 2 and arguments[0] in DIRECTORY_OPTIONS:
        arguments = arguments[2:]
    model_dir = os.environ["TRAINOPS_MODEL_DIR"]
    archive = os.path.join(model_dir, "model.tar.gz")
    if os.path.isfile(archive):
        model_dir = extract(archive, os.path.join(os.path.dirname(model_dir.rstrip("/")), "model-extracted"))
    channel = os.environ.get("TRAINOPS_EVALUATION_CHANNEL", "test")
    channel_variable = "".join(c if c.isalnum() or c == "_" else "_" for c in channel).upper()
    output_dir = os.environ["TRAINOPS_OUTPUT_DIR"]
    os.makedirs(output_dir, exist_ok=True)
    os.environ.update({
        "SM_CHANNEL_MODEL": model_dir,
        "SM_CHANNEL_" + channel_variable: os.environ["TRAINOPS_TEST_DIR"],
        "SM_CHANNELS": json.dumps(sorted(["model", channel])),
        "SM_OUTPUT_DATA_DIR": output_dir,
        "TRAINOPS_EVALUATION_DIR": output_dir,
    })
    code_dir = os.path.dirname(os.path.abspath(__file__))
    script = os.path.join(code_dir, os.environ["TRAINOPS_EVALUATION_ENTRY_POINT"])
    os.chdir(code_dir)
    sys.path.insert(0, code_dir)
    sys.argv = [script] + arguments
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
'''

# The limits are the local extraction's (trainops.backends.local.model_archive), written into the script's text: it
# runs where trainops is not installed.
BOOTSTRAP_SOURCE = (_BOOTSTRAP_TEMPLATE.replace("@LIMIT_VARIABLE@", LIMIT_VARIABLE)
                    .replace("@DEFAULT_LIMIT_BYTES@", str(DEFAULT_LIMIT_BYTES))
                    .replace("@MAX_MEMBERS@", str(MAX_MEMBERS)))
