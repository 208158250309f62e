"""Which of trainops' own files the controller of `trainops run SPEC` (local backend) enters, and which it only imports.

A file is *entered* when at least one of its functions runs beyond the module body; *imported only* when its module
body ran and nothing else. The job itself (the emulated hosts' runtime processes) is not counted: this is what the
controller process loads. Prints the counts, the files imported only, and the product's line count.

    .venv/bin/python bench/controller_files.py
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import textwrap
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
PACKAGE = REPOSITORY / "trainops"


def product_lines() -> int:
    return sum(len(path.read_text(encoding="utf-8").splitlines()) for path in PACKAGE.rglob("*.py"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="print every file entered too")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="trainops-controller-"))
    (work / "code").mkdir()
    (work / "code" / "train.py").write_text(textwrap.dedent("""
        import os
        open(os.path.join(os.environ["SM_MODEL_DIR"], "model.txt"), "w").write("ok")
        print("trained")
    """))
    spec = work / "spec.yaml"
    spec.write_text(f"name: controller-files\nentry_point: train.py\nsource_dir: {work / 'code'}\n"
                    "instance_type: ml.m5.large\ninstance_count: 2\n")
    entered: set[str] = set()

    def profile(frame, event, _arg):  # every call of a trainops function marks its file
        if event == "call":
            name = frame.f_code.co_filename
            if name.startswith(str(PACKAGE)) and frame.f_code.co_name != "<module>":
                entered.add(name)

    from trainops.cli import main as cli

    sys.setprofile(profile)
    try:
        code = cli(["run", str(spec), "--workdir", str(work / "state"), "--job-name", "controller-files-1"])
    finally:
        sys.setprofile(None)
    imported = {module.__file__ for name, module in list(sys.modules.items())
                if name.startswith("trainops") and getattr(module, "__file__", None)}
    only_imported = sorted(str(Path(path).relative_to(REPOSITORY)) for path in imported - entered)
    sagemaker = [path for path in sorted(imported) if "/backends/sagemaker/" in path]
    print(f"exit code of trainops run: {code}")
    print(f"controller files imported: {len(imported)}; entered: {len(entered & imported)}; "
          f"imported and never run: {len(only_imported)}; SageMaker backend modules imported: {len(sagemaker)}")
    for path in only_imported:
        print(f"  imported only: {path}")
    if args.list:
        for path in sorted(entered):
            print(f"  entered: {Path(path).relative_to(REPOSITORY)}")
    print(f"product lines (trainops/**/*.py): {product_lines()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
