"""Which values of a job's `environment` are secrets: the one rule every output of trainops masks by.

A variable is secret when

- its name says so (`trainops.spec.base.looks_secret`: HF_TOKEN, DB_PASSWORD, apiKey, AWS_SECRET_ACCESS_KEY), or its
  last word is KEY, PAT or CREDS (OPENAI_KEY, GITHUB_PAT, GCP_CREDS, sshKey); or
- its value holds a URL with credentials, ``scheme://user:password@host`` (DATABASE_URL, MLFLOW_TRACKING_URI,
  BROKER_URL, any name): the whole value is masked; or
- its value holds the value of a variable secret by the two rules above (``MODEL_AUTH: "Bearer <HF_TOKEN's value>"``):
  a name that does not look secret does not make a secret's value public.

Masking goes by value, not only by name: wherever a spec document or a request is written out, every other text that
holds a secret's value (a tag, a channel's URI, a hyperparameter) has it replaced by `MASK` too. A hyperparameter
holding one is refused by the spec's rules (hyperparameters are visible to anyone who can describe the job), so a spec
that runs never needs a masked value outside `environment`, and `restore_masked` restores `environment` only.

Secret values reach the training script unchanged and nothing else: `trainops render`, the local backend's logs,
status and failure files, the step results (Airflow XComs, KFP outputs), the registry entry, the compiled KFP
pipeline and the Airflow prepare task's XComs show `MASK` instead. Where a masked spec must still run (the KFP train
component, the Airflow training task), `restore_masked` takes each masked value from the environment of the process
that runs the job: give it there (a Kubernetes secret as an environment variable, the Airflow worker's environment).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from trainops.errors import Problem, SpecError
from trainops.spec.base import looks_secret

#: What a secret value is shown as (the runtime's output relay uses the same).
MASK = "****"

# Last words of a name that mean a credential in environment variables. Not applied to hyperparameter names, which
# use `looks_secret` alone: `label_key` or `text_key` name dataset columns there.
SECRET_LAST_WORDS = {"key", "pat", "creds"}

# scheme://user:password@ (the user may be empty: redis://:password@host); anywhere in the value, so
# "--db=postgres://u:p@h/db" counts too.
CREDENTIAL_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s/@:]*:[^\s/@]+@")


def _words(name: str) -> list[str]:
    return [word.lower() for word in re.findall(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])", name)]


def secret_name(name: str) -> bool:
    """True when an environment variable's name says it holds a secret."""
    words = _words(name)
    return looks_secret(name) or bool(words) and words[-1] in SECRET_LAST_WORDS


def secret_value(value: Any) -> bool:
    """True when a value holds a URL with credentials (``scheme://user:password@``)."""
    return isinstance(value, str) and CREDENTIAL_URL.search(value) is not None


def is_secret(name: str, value: Any) -> bool:
    """The rule: a secret-looking name, or a value holding a URL with credentials."""
    return secret_name(str(name)) or secret_value(value)


#: A secret's value shorter than this is not searched for elsewhere: it would mask parts of ordinary words (the
#: runtime's output relay has the same bound).
MIN_SECRET_LENGTH = 4


def _named_secrets(environment: Mapping[str, Any]) -> dict[str, str]:
    return {str(name): str(value) for name, value in environment.items() if is_secret(str(name), value)}


def secret_values(environment: Mapping[str, Any] | None) -> list[str]:
    """The values to mask wherever they appear: those of the variables secret by name or by a credential URL, at
    least `MIN_SECRET_LENGTH` long, longest first (a secret that contains another is masked whole)."""
    values = {value for value in _named_secrets(environment or {}).values() if len(value) >= MIN_SECRET_LENGTH}
    return sorted(values, key=len, reverse=True)


def holds_secret(value: Any, secrets: list[str]) -> bool:
    """True when ``value`` (text) contains one of ``secrets`` (`secret_values`)."""
    return isinstance(value, str) and any(secret in value for secret in secrets)


def secret_held_by(value: Any, environment: Mapping[str, Any] | None) -> str | None:
    """The name of the secret variable of ``environment`` whose value ``value`` (text) contains, or None."""
    for name, secret in sorted(_named_secrets(environment or {}).items(), key=lambda item: -len(item[1])):
        if len(secret) >= MIN_SECRET_LENGTH and isinstance(value, str) and secret in value:
            return name
    return None


def secret_environment_names(environment: Mapping[str, Any] | None) -> list[str]:
    """The names of the secret variables of an environment mapping, sorted: by name, by a credential URL, or by
    holding another secret variable's value."""
    environment = environment or {}
    secrets = secret_values(environment)
    return sorted(str(name) for name, value in environment.items()
                  if is_secret(str(name), value) or holds_secret(value, secrets))


def masked_environment(environment: Mapping[str, Any] | None) -> dict[str, Any]:
    """A copy of the environment with every secret value (`secret_environment_names`) replaced by `MASK`."""
    names = set(secret_environment_names(environment))
    return {name: MASK if str(name) in names else value for name, value in (environment or {}).items()}


def mask_values(data: Any, secrets: list[str]) -> Any:
    """A copy of JSON data in which every text (values and mapping keys, at any depth) has each of ``secrets``
    replaced by `MASK`."""
    if isinstance(data, str):
        for secret in secrets:
            data = data.replace(secret, MASK)
        return data
    if isinstance(data, Mapping):
        return {mask_values(key, secrets): mask_values(value, secrets) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return [mask_values(item, secrets) for item in data]
    return data


def masked_spec_document(document: Any) -> Any:
    """A copy of a job spec document (a mapping with ``environment``) with its secret environment values masked,
    and every secret's value masked wherever else in the document it appears; anything else is returned as it
    is."""
    if not isinstance(document, Mapping) or not isinstance(document.get("environment"), Mapping):
        return document
    environment = document["environment"]
    secrets = secret_values(environment)
    return {mask_values(key, secrets): masked_environment(value) if key == "environment"
            else mask_values(value, secrets) for key, value in document.items()}


def restore_masked(document: Any, environ: Mapping[str, str], field: str = "spec") -> Any:
    """A copy of a spec document whose masked environment values are taken from ``environ`` (the process that runs
    the job); `SpecError` naming each variable that is masked and not there. Other documents are returned as they
    are."""
    if not isinstance(document, Mapping) or not isinstance(document.get("environment"), Mapping):
        return document
    environment = dict(document["environment"])
    missing = []
    for name, value in environment.items():
        if value == MASK:
            if environ.get(name) in (None, "", MASK):
                missing.append(Problem(f"{field}.environment.{name}",
                                       "is masked (secrets never travel in pipelines, XComs or logs): set "
                                       f"{name} in the environment of the process that runs the job (a Kubernetes "
                                       "secret as an environment variable of the pod, the Airflow worker's "
                                       "environment)"))
            else:
                environment[name] = environ[name]
    if missing:
        raise SpecError(missing, source="secrets")
    return {**document, "environment": environment}


def public_spec(spec: Any) -> dict[str, Any]:
    """A job spec as it may be shown (a status record, a pipeline's summary): `spec.to_json_dict()` with the secret
    environment values replaced by the mask."""
    return masked_spec_document(spec.to_json_dict())
