"""The install hint of a missing optional package works where trainops is installed (issue 47, item 6):
`pip install 'trainops[aws]'` finds nothing from a checkout (no index has trainops), so a checkout's hint names its
own path too."""

from __future__ import annotations

from pathlib import Path

import trainops
from trainops.errors import install_hint


def test_a_checkout_is_told_its_own_editable_install():
    error = ModuleNotFoundError("No module named 'boto3'", name="boto3")
    checkout = Path(trainops.__file__).resolve().parent.parent
    assert (checkout / "pyproject.toml").is_file()  # this suite runs from a checkout
    assert install_hint(error) == f"pip install 'trainops[aws]' (from this checkout: pip install -e '{checkout}[aws]')"
    assert install_hint(ModuleNotFoundError("No module named 'yaml'", name="yaml")) is None
