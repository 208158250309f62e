"""The one base model every spec model inherits, and the small shared pieces of policy.

`extra="forbid"` makes a typo'd key an error instead of a silently ignored setting; every rule that needs more than
one field is a named method returning `Problem`s, so all of them are reported at once.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from trainops.errors import Problem

# Characters a shell would interpret. Custom MPI options are split with shlex and passed as argv, never to a shell;
# a metacharacter in them means the user expected a shell, which we refuse rather than half-honour.
SHELL_METACHARACTERS = set(";&|`$<>(){}!\n\r\\*?")

# Hyperparameters are visible to anyone allowed to describe the job; names with these words carry secrets. Matched
# word by word (hf_token, DB_PASSWORD, apiKey) so that tokenizer_name or max_tokens are not taken for secrets.
SECRET_WORDS = {"password", "passwd", "passphrase", "pwd", "secret", "token", "apikey", "credential", "credentials",
                "privatekey", "accesskey", "secretkey", "sessiontoken"}
SECRET_PAIRS = {("access", "key"), ("api", "key"), ("private", "key"), ("secret", "key"), ("auth", "token"),
                ("session", "token"), ("client", "secret")}


def looks_secret(name: str) -> bool:
    """True when a hyperparameter or environment name says it holds a secret (hf_token, DB_PASSWORD, apiKey)."""
    words = [word.lower() for word in re.findall(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])", name)]
    if any(word in SECRET_WORDS for word in words):
        return True
    return any(pair in SECRET_PAIRS for pair in zip(words, words[1:]))


S3_URI = re.compile(r"^s3://[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9](/.*)?$")
ROLE_ARN = re.compile(r"^arn:aws[a-z\-]*:iam::\d{12}:role/[\w+=,.@\-/]{1,512}$")
JOB_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
REGION = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d$")
SUBNET_ID = re.compile(r"^subnet-[0-9a-f]{8,17}$")
SECURITY_GROUP_ID = re.compile(r"^sg-[0-9a-f]{8,17}$")
FILE_SYSTEM_ID = re.compile(r"^fs-[0-9a-f]{8,21}$")
ENV_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]{0,511}$")
CHANNEL_NAME = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


class CoreModel(BaseModel):
    """Base of every spec model: unknown keys are errors, values are validated on assignment too."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, populate_by_name=True)


def raise_problems(title: str, problems: Iterable[Problem], value: Any) -> None:
    """Raise one pydantic ValidationError carrying every problem, each at its own field path.

    Pydantic merges the locations into the outer model's, so a nested model's problems keep their full path.
    """
    problems = list(problems)
    if not problems:
        return
    details = [
        InitErrorDetails(
            type=PydanticCustomError("trainops_rule", "{message}", {"message": problem.message}),
            loc=tuple(part for part in problem.path.split(".") if part) if problem.path else (),
            input=value,
        )
        for problem in problems
    ]
    raise ValidationError.from_exception_data(title, details)


def shell_metacharacter_problem(path: str, text: str) -> Problem | None:
    """A problem when `text` (custom MPI options) holds characters only a shell would interpret."""
    found = sorted(SHELL_METACHARACTERS.intersection(text))
    if not found:
        return None
    shown = " ".join(repr(char) for char in found)
    return Problem(
        path,
        f"contains shell metacharacters ({shown}); options are split like a shell would (shlex) and passed as "
        "arguments, never run through a shell: remove them",
    )
