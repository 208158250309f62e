"""Why AWS could not be reached, said as a cause and its fix: no credentials, credentials AWS refuses, an endpoint
that does not answer.

botocore raises these before (or instead of) any answer about the job, from whichever call came first: the
re-attach look, an upload, the preflight. Left alone they reach the CLI as ``internal error: NoCredentialsError``;
`explain` turns one into an `AwsSetUpError` (exit code 2: the set-up, not the job, is what to fix) naming what to
do. It is not a `SpecError` on purpose: a look that meets one must not read it as "no such job".
The classes are matched by name along the error's MRO, so this module imports nothing from botocore and costs
nothing to import.
"""

from __future__ import annotations

import os

from trainops.errors import TrainopsError

#: How to give boto3 credentials, for every message that says there are none.
CREDENTIAL_WAYS = ("set AWS_PROFILE (a profile of ~/.aws/credentials or ~/.aws/config, `aws configure` writes one), "
                   "or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or log in with `aws sso login`; on AWS compute "
                   "an instance or task role gives them. Without an AWS account, README's moto server stands in "
                   "(AWS_ENDPOINT_URL=http://127.0.0.1:5000 and test credentials)")

#: botocore's errors that mean no usable credentials were found on this machine.
_NO_CREDENTIALS = frozenset({"NoCredentialsError", "PartialCredentialsError", "CredentialRetrievalError",
                             "SSOTokenLoadError", "UnauthorizedSSOTokenError",
                             "TokenRetrievalError", "NoAuthTokenError"})

#: AWS error codes that mean the credentials were sent and refused (unknown key, expired token, wrong secret).
REFUSED_CREDENTIAL_CODES = frozenset({"InvalidClientTokenId", "UnrecognizedClientException", "ExpiredToken",
                                      "ExpiredTokenException", "InvalidAccessKeyId", "SignatureDoesNotMatch",
                                      "InvalidSignatureException", "AuthFailure", "RequestExpired"})

#: botocore's transport errors: the endpoint did not answer at all (after botocore's own retries).
_UNREACHABLE = frozenset({"EndpointConnectionError", "ConnectTimeoutError", "ReadTimeoutError",
                          "ConnectionClosedError", "ProxyConnectionError", "SSLError"})


class AwsSetUpError(TrainopsError):
    """AWS could not be called from here: the credentials or the endpoint, each said with its fix."""

    exit_code = 2


def _names(error: BaseException) -> set[str]:
    return {cls.__name__ for cls in type(error).__mro__}


def _endpoint_setting() -> str:
    """Which endpoint setting of the environment is in force, for the fix to name."""
    chosen = sorted(name for name in os.environ if name == "AWS_ENDPOINT_URL" or name.startswith("AWS_ENDPOINT_URL_"))
    return ", ".join(f"{name}={os.environ[name]}" for name in chosen)


def explain(error: BaseException) -> AwsSetUpError | None:
    """The error a user should see for an AWS call that could not be made (exit code 2, cause and fix), or None when
    ``error`` is not one of those (the caller handles it as before)."""
    names = _names(error)
    if "ProfileNotFound" in names:
        return AwsSetUpError(f"AWS profile: {error}: create it (aws configure --profile NAME), choose one that "
                             "~/.aws/config has, or unset AWS_PROFILE to use the default credential chain")
    if names & _NO_CREDENTIALS:
        return AwsSetUpError(f"AWS credentials: none usable on this machine ({error}): {CREDENTIAL_WAYS}")
    code = str((getattr(error, "response", None) or {}).get("Error", {}).get("Code", ""))
    if code in REFUSED_CREDENTIAL_CODES:
        return refused_credentials(code, str(error))
    if unreachable(error):
        setting = _endpoint_setting()
        where = (f"the endpoint comes from {setting}: check that address, or unset it to use AWS's own"
                 if setting else "check the network (a proxy: HTTPS_PROXY), the region's name, and that this "
                                 "machine can open HTTPS connections to AWS")
        return AwsSetUpError(f"AWS endpoint: could not be reached ({error}), after botocore's retries: {where}")
    return None


def unreachable(error: BaseException) -> bool:
    """Whether ``error`` is botocore's: the endpoint did not answer at all."""
    return bool(_names(error) & _UNREACHABLE)


def refused_credentials(code: str, message: str) -> AwsSetUpError:
    """The error of credentials that AWS refused (``code``: its error code), with the fix."""
    return AwsSetUpError(f"AWS credentials: refused by AWS ({code}: {message}): they are unknown, expired or "
                         f"mistyped; renew them: {CREDENTIAL_WAYS}")
