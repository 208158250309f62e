"""The preflight's reads of the account: what they prove refuses a job, what they cannot read becomes a note.

Before a training job is created the preflight (`preflight`, `capacity`) reads FSx, EC2, Service Quotas and
SageMaker. A job is refused only when an answer proves it cannot run: a subnet in another zone than the file
system, a quota the running jobs already use up, a training plan that does not exist. A read that fails proves
nothing about the job: no permission for Service Quotas, an endpoint without that API (a moto server, a VPC
endpoint that does not reach it), a throttled or failing service, a timeout. Each of those becomes a note naming
what was not checked and why, and the job is submitted as if the check had passed, as SageMaker itself would
take it. Reads go through the advisory clients (`trainops.aws.clients.advisory_client`: one retry, short timeouts),
so a look that cannot be made costs seconds.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from trainops.aws.clients import error_code, error_message
from trainops.errors import Problem

T = TypeVar("T")
#: Error codes that mean the caller may not read the resource (the check is skipped, never the job refused).
NOT_ALLOWED = frozenset({"AccessDenied", "AccessDeniedException", "UnauthorizedOperation"})


@dataclass
class Findings:
    """What the preflight found: problems (the job must not be submitted) and notes (said, not blocking)."""

    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def why(error: BaseException, action: str) -> str:
    """Why a read failed, in a few words: no permission for ``action`` (an IAM action such as
    ``servicequotas:ListServiceQuotas``), or the error the service or the connection gave."""
    from botocore.exceptions import ClientError

    if isinstance(error, ClientError):
        code = error_code(error)
        if code in NOT_ALLOWED:
            return f"no permission for {action}"
        # An endpoint that is not AWS may answer HTML (a moto server's 500 page): its title, else its text.
        message = error_message(error)
        title = re.search(r"<title>(.*?)</title>", message, re.IGNORECASE | re.DOTALL)
        message = " ".join(re.sub(r"<[^>]*>", " ", title.group(1) if title else message).split())
        shown = message if len(message) <= 160 else message[:157] + "..."
        return f"{action} failed ({code}{': ' + shown if shown else ''})"
    return f"{action} failed ({type(error).__name__}: {error})"


def read(findings: Findings, what: str, action: str, call: Callable[[], T],
         proves: Callable[[str], Problem | None] | None = None) -> T | None:
    """``call()``'s answer, or None when it failed: a problem when ``proves`` turns the error code into one (the
    resource does not exist), else the note "``what`` not checked: <why>"."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return call()
    except ClientError as error:
        problem = proves(error_code(error)) if proves is not None else None
        if problem is not None:
            findings.problems.append(problem)
        else:
            findings.notes.append(f"{what} not checked: {why(error, action)}")
    except BotoCoreError as error:  # no connection, a timeout, no credentials: nothing was read
        findings.notes.append(f"{what} not checked: {why(error, action)}")
    return None

