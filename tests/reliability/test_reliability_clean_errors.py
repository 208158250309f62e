"""Clean errors (issue 15, item 13): command lines that ended in `internal error: NoRegionError`,
`NotADirectoryError`, `FileNotFoundError` or kfp's `ValueError` (exit 1), or that listed a file as an empty registry
(exit 0), now exit 2 with a message saying what is wrong. The cases are in clean_errors_scenario.py.
"""

from __future__ import annotations

import pytest
from clean_errors_scenario import run_cases


@pytest.mark.system
def test_each_case_exits_2_with_a_message_and_no_traceback(tmp_path):
    rows = run_cases(tmp_path)
    wrong = [(row["case"], row["wrong"], row["message"][-400:]) for row in rows if row["wrong"]]
    assert not wrong, wrong
    assert len(rows) == 22
    # Nothing was run or created for the refused work directories.
    assert not (tmp_path / "a-file").is_dir() and not list((tmp_path / "home").glob("output*"))
