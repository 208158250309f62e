"""The script a SageMaker evaluation (processing job) starts: it turns the processing job's layout into the
evaluation contract (docs/contracts.md section 6), so the user's script is the same file locally and on SageMaker.

The processing backend hands the model over as an unextracted model.tar.gz and passes
--model-dir/--test-dir/--output-dir; the bootstrap extracts the model, sets the contract's variables (extracted
model, SM_CHANNEL_*, SM_OUTPUT_DATA_DIR, TRAINOPS_EVALUATION_DIR) and runs the script with the hyperparameters as
``--key value``. It runs where trainops is not installed (any image), so it is one file of standard-library Python:
the text of `trainops.backends.model_extract`, the extraction the local backend runs too (no link followed,
sizes checked before writing), followed by the part below.
"""

import functools
from importlib import resources

#: The name the bootstrap has in the code prefix of a SageMaker evaluation.
BOOTSTRAP_NAME = "trainops_evaluate_bootstrap.py"

# What follows model_extract's text in the bootstrap (which already imported os and the extraction's names).
_BOOTSTRAP_MAIN = '''

# --- trainops evaluation bootstrap: sets up the evaluation contract, then runs the user's script -----------------
import json
import runpy
import sys

DIRECTORY_OPTIONS = ("--model-dir", "--test-dir", "--output-dir")


def main():
    arguments = sys.argv[1:]
    while len(arguments) >= 2 and arguments[0] in DIRECTORY_OPTIONS:
        arguments = arguments[2:]
    model_dir = os.environ["TRAINOPS_MODEL_DIR"]
    archive = os.path.join(model_dir, "model.tar.gz")
    if os.path.isfile(archive):
        destination = os.path.join(os.path.dirname(model_dir.rstrip("/")), "model-extracted")
        try:
            model_dir = str(extract(archive, destination, room_hint="give the processing job a larger volume"))
        except ArchiveRefused as error:
            # The size limit's own errors name the variable to fix; the archive's name the archive.
            where = "" if error.field == "model_artifact" else error.field + ": "
            raise SystemExit("trainops evaluation: %s%s" % (where, error))
        except NoRoom as error:
            raise SystemExit("trainops evaluation: %s" % error)
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


@functools.lru_cache(maxsize=1)
def bootstrap_source() -> str:
    """The bootstrap's text: `trainops.backends.model_extract`'s source (read from the installed package when
    an evaluation is submitted, not at import), followed by the bootstrap's own part."""
    extraction = resources.files("trainops.backends").joinpath("model_extract.py").read_text(encoding="utf-8")
    return extraction + _BOOTSTRAP_MAIN
