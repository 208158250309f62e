"""Hostile job names (issue 15, item 11): a name that would become a path outside `$TRAINOPS_HOME` (`../x`, an
absolute path, `.`, `..`, `;`, a newline) is refused with exit 2 naming `job_name` by `run`, `status`, `logs` and
`stop`, and nothing is written outside `$TRAINOPS_HOME` nor any job directory inside it. Before the fix, `run` wrote
the job directory and its model to `<home>/x`, to the absolute path, and to `<home>/..`.
"""

from __future__ import annotations

import pytest
from names_scenario import run_hostile_names


@pytest.mark.system
def test_hostile_job_names_are_refused_and_nothing_is_written_outside_the_home(tmp_path):
    outcome = run_hostile_names(tmp_path)
    assert outcome["outside"] == [], outcome["created"]
    assert outcome["in_jobs"] == [], outcome["created"]
    for row in outcome["rows"]:
        assert row["code"] == 2, row
        assert "job_name" in row["message"] and "Traceback" not in row["message"], row
        assert "internal error" not in row["message"], row


def test_a_safe_name_is_one_component_and_stays_under_its_root(tmp_path):
    from trainops.backends.hostfs import paths
    from trainops.errors import SpecError

    assert paths.job_dir("digits-1a2b", tmp_path) == tmp_path.resolve() / "jobs" / "digits-1a2b"
    assert paths.job_dir("key@job_2.v3", tmp_path).name == "key@job_2.v3"
    for name in ("../x", "/etc", ".", "..", "a/b", "a;b", "a\nb", "", ".hidden", "-rf", "a\0b", "x" * 256, None):
        with pytest.raises(SpecError) as raised:
            paths.job_dir(name, tmp_path)
        assert raised.value.problems[0].path == "job_name"
    # A link planted under a safe name that leads out of the jobs directory is refused too.
    (tmp_path / "jobs").mkdir(exist_ok=True)  # made (mode 0700) by the calls above
    (tmp_path / "jobs" / "planted").symlink_to(tmp_path)
    with pytest.raises(SpecError, match="leads outside"):
        paths.job_dir("planted", tmp_path)
