"""The public API: every name in `trainops.__all__` resolves, lazily (importing trainops imports none of them)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import trainops


def test_every_public_name_resolves_to_its_module():
    assert sorted(trainops.__all__) == sorted(["__version__", *trainops._EXPORTS])
    for name in trainops.__all__:
        value = getattr(trainops, name)
        assert value is not None, name
    assert trainops.train.__module__ == "trainops.steps.train"
    assert trainops.LocalOptions.backend == "local" and trainops.SageMakerOptions.backend == "sagemaker"
    assert issubclass(trainops.Unsupported, trainops.SpecError)


def test_an_unknown_name_is_an_attribute_error():
    try:
        trainops.no_such_thing  # noqa: B018 - the look-up is the test
    except AttributeError as error:
        assert "no_such_thing" in str(error)
    else:
        raise AssertionError("trainops.no_such_thing resolved")


def test_importing_trainops_imports_no_submodule():
    code = "import sys, trainops; print(sorted(m for m in sys.modules if m.startswith('trainops.')))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"


def test_the_package_ships_its_type_marker():
    assert (Path(trainops.__file__).parent / "py.typed").is_file()
