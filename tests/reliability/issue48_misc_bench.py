"""Issue 48's classes 5, 6, 7 and 9, for bench/reliability.py (section `issue48-misc`): each class's tests run as
pytest runs them, their outcome and time recorded as RELIABILITY.md rows 48.5, 48.6, 48.7 and 48.9 (the red team's
own cases are held out: these are the project's)."""

from __future__ import annotations

from local_breaks_bench import measure as measure_breaks
from local_breaks_bench import render_rows

# (item, case, bound, test files or node ids)
CLASSES = [
    ("48.5", "Secrets masked by value, not only by name: a secret's value under an innocent name (whole, and inside "
             "`Bearer ...`), in a tag, as a key, as a hyperparameter, in a value of the pipeline file; through `kfp "
             "compile` (the base64 spec_json decoded), `render`, a local run's console, records and logs",
     "the value nowhere in the YAML, the output or a file of the run; the innocent names masked whole and given to "
     "the train pod from a Secret like the others; a hyperparameter or pipeline value holding it refused (exit 2, "
     "field named); the script still gets the value",
     ["tests/reliability/test_reliability_secret_values.py"]),
    ("48.6", "Log marks are input: the Airflow Variable of a task's log mark forged (text, a negative offset, one far "
             "past the end of the log, one inside a line, not JSON, huge) before deferred training tasks run their "
             "real local jobs, under `dag.test()`; a resumed trigger and a re-attaching task with each",
     "each mark ignored with a warning in the task log; every line of the job written (lines may repeat, none "
     "hidden)",
     ["tests/unit/operators/test_log_marks_input.py", "tests/system/test_airflow_log_marks.py"]),
    ("48.7", "Open from earlier rounds: KFP placeholders in every form (the DSL's `{{channel:...}}` in a pipeline "
             "value, `{{$...}}` as a mapping key, the channel form inside the job spec); a console still behind when "
             "8 ranks' job ends (held past the end's bound), and a line that reaches the console after the end",
     "refused at compile time naming the field (nothing written), the spec's values kept literal; the backlog left "
     "out, the note and every rank's last line shown; the late line printed, never dropped",
     ["tests/unit/components/test_pipeline.py::test_a_dsl_channel_or_a_placeholder_key_is_refused_at_compile_time_"
      "naming_the_field",
      "tests/unit/components/test_pipeline.py::test_a_dsl_channel_in_the_job_spec_stays_literal",
      "tests/reliability/test_reliability_log_flood.py::test_a_console_still_behind_when_the_job_ends_shows_each_"
      "sources_last_line_not_the_backlog",
      "tests/reliability/test_reliability_log_flood.py::test_a_line_that_comes_after_the_end_is_printed_not_queued_"
      "for_a_stopped_printer"]),
    ("48.9", "Tests that run project code as another user (the useradd rival under prlimit, user nobody) from a "
             "clone other users cannot read (a 0700 `mktemp -d`): they get a readable copy of trainops and its "
             "dependencies, never the checkout's path",
     "pass from the 0700 clone; no skip for want of a readable trainops",
     ["tests/reliability/test_reliability_private_clone.py"]),
]


def measure() -> dict:
    return measure_breaks(CLASSES)


__all__ = ["CLASSES", "measure", "render_rows"]
