"""The attempts engine's decisions on their own: names read back, the state a deferral carries, the run's money
before its first attempt, and a wait that left its job running."""

from __future__ import annotations

from trainops.steps.attempts_engine import AttemptsEngine, Done, Fail, Retry, attempt_name, attempt_number

LOST = {"status": "Failed", "failure_reason": "CapacityError: Unable to provision requested ML compute capacity",
        "duration_seconds": 3600}


def test_attempt_numbers_read_back_the_names_and_nothing_else():
    for number in (1, 2, 12):
        assert attempt_number("bert", attempt_name("bert", number)) == number
    long = "x" * 63
    assert attempt_number(long, attempt_name(long, 7)) == 7
    assert attempt_number("bert", "bert-x") is None and attempt_number("bert", "other-2") is None
    assert attempt_number("bert-2", "bert-2") == 1  # a name that ends in digits is attempt 1 of itself


def test_the_state_a_deferral_carries_is_what_was_used_and_the_next_name_comes_from_the_ended_job():
    first = AttemptsEngine("bert", {"infrastructure": 2, "backoff_seconds": 0})
    retry = first.ended({**LOST, "job_name": "bert"})
    assert isinstance(retry, Retry) and (retry.number, retry.job_name, retry.used) == (2, "bert-2", 1)
    # The operator's next resumption builds a fresh engine from the event and the deferral's `used` alone.
    resumed = AttemptsEngine("bert", {"infrastructure": 2, "backoff_seconds": 0}, used=first.used)
    again = resumed.ended({**LOST, "job_name": "bert-2"})
    assert isinstance(again, Retry) and (again.number, again.job_name, again.used) == (3, "bert-3", 2)
    last = AttemptsEngine("bert", {"infrastructure": 2}, used=resumed.used).ended({**LOST, "job_name": "bert-3"})
    assert isinstance(last, Fail) and last.failure_class == "infrastructure" and not last.refused


def test_no_new_attempt_starts_when_the_earlier_ones_spent_the_money_unless_one_runs():
    def fits(spent):
        return (spent is not None and spent < 1.0), "max_cost_usd $1.00 is spent"

    known = [{**LOST, "job_name": "bert", "cost": {"estimated_cost": 1.5}}]
    refused = AttemptsEngine("bert", known=known, fits=fits).opening()
    assert isinstance(refused, Fail) and refused.failure()["failure_class"] == "budget"
    assert refused.failure()["failure_evidence"]["evidence"] == "max_cost_usd $1.00 is spent"
    # an attempt after them runs: it is followed (and guarded with what is left), never left unwatched
    assert AttemptsEngine("bert", known=known, fits=fits, follows=True).opening() is None
    assert AttemptsEngine("bert", fits=fits).opening() is None  # nothing spent yet


def test_a_wait_that_left_its_job_running_is_a_timeout_and_a_running_job_not_waited_for_is_done():
    engine = AttemptsEngine("bert", {"infrastructure": 3, "timeout": 3})
    left = engine.ended({"job_name": "bert", "status": "InProgress",
                         "guard": {"kind": "wait_bound", "message": "wait bound: ... left running"}})
    assert isinstance(left, Fail) and left.failure_class == "timeout"
    report = engine.report({"job_name": "bert", "status": "InProgress"})
    assert report["failure_class"] == "timeout" and "left running" in report["failure_evidence"]["evidence"]
    assert AttemptsEngine("bert").ended({"job_name": "bert", "status": "InProgress"}) == Done("InProgress")
