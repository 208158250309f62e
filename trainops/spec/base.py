"""The one base model every spec model inherits, and the small shared pieces of policy.

`extra="forbid"` makes a typo'd key an error instead of a silently ignored setting; every rule that needs more than
one field is a named method returning `Problem`s, so all of them are reported at once.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any, get_args

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError, core_schema

from trainops.errors import Problem

# Characters a shell would interpret. Custom MPI options are split with shlex and passed as argv, never to a shell;
# a metacharacter in them means the user expected a shell, which we refuse rather than half-honour.
SHELL_METACHARACTERS = set(";&|`$<>(){}!\n\r\\*?")

# Hyperparameters are visible to anyone allowed to describe the job; names with these words carry secrets. Matched
# word by word (hf_token, DB_PASSWORD, apiKey) so that tokenizer_name or max_tokens are not taken for secrets.
SECRET_WORDS = {"password", "passwd", "passphrase", "pwd", "secret", "apikey", "credential", "credentials",
                "privatekey", "accesskey", "secretkey", "sessiontoken", "accesstoken", "authtoken"}
SECRET_PAIRS = {("access", "key"), ("api", "key"), ("private", "key"), ("secret", "key"), ("auth", "token"),
                ("session", "token"), ("client", "secret"), ("access", "token"), ("refresh", "token"),
                ("bearer", "token"), ("api", "token")}
# "token" alone is also a unit of text: pad_token, eos_token, max_token_length and token_budget are model settings.
# It means a credential when it ends the name (hf_token, GITHUB_TOKEN, token) and does not name a special token.
TEXT_TOKEN_WORDS = {"pad", "eos", "bos", "unk", "sep", "cls", "mask", "start", "end", "stop", "special", "image",
                    "audio", "video", "max", "min", "num"}


def looks_secret(name: str) -> bool:
    """True when a hyperparameter or environment name says it holds a secret (hf_token, DB_PASSWORD, apiKey).

    tokenizer_name, max_tokens, pad_token_id or eos_token are not secrets.
    """
    words = [word.lower() for word in re.findall(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])", name)]
    if any(word in SECRET_WORDS for word in words):
        return True
    if any(pair in SECRET_PAIRS for pair in zip(words, words[1:], strict=False)):
        return True
    return bool(words) and words[-1] == "token" and (len(words) == 1 or words[-2] not in TEXT_TOKEN_WORDS)


S3_URI = re.compile(r"^s3://[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9](/.*)?\Z")
ROLE_ARN = re.compile(r"^arn:aws[a-z\-]*:iam::\d{12}:role/[\w+=,.@\-/]{1,512}\Z")
JOB_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}\Z")
REGION = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d\Z")
SUBNET_ID = re.compile(r"^subnet-[0-9a-f]{8,17}\Z")
SECURITY_GROUP_ID = re.compile(r"^sg-[0-9a-f]{8,17}\Z")
FILE_SYSTEM_ID = re.compile(r"^fs-[0-9a-f]{8,21}\Z")
ENV_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]{0,511}\Z")
CHANNEL_NAME = re.compile(r"^[A-Za-z0-9._-]{1,64}\Z")


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


_BUILT_IN_ERRORS = frozenset(get_args(core_schema.ErrorType))


def relocated(error: ValidationError, move: Callable[[tuple], tuple]) -> ValidationError:
    """The same errors with each location passed through `move` (to drop the tags pydantic adds for unions).

    Raised from a field validator, pydantic puts the field's own name in front, so `JobSpec.model_validate` reports
    `distribution.smdistributed.dataparallel.custom_mpi_options`, the path the user wrote, not pydantic's
    `distribution.sdk.smdistributed...`.
    """
    details = []
    for item in error.errors(include_url=False):
        context = item.get("ctx")
        if item["type"] in _BUILT_IN_ERRORS:
            kind: Any = item["type"]
        else:
            message = context["message"] if context and "message" in context else item["msg"]
            kind = PydanticCustomError(item["type"], "{message}", {"message": message})
            context = None
        detail = InitErrorDetails(type=kind, loc=move(tuple(item["loc"])), input=item.get("input"))
        if context:
            detail["ctx"] = context
        details.append(detail)
    return ValidationError.from_exception_data(error.title, details)


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
