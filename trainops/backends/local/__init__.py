"""The local backend: runs jobs and stages data on this machine, with the same specs the SageMaker backend takes."""

from trainops.backends.local import vocabulary as vocabulary  # noqa: E402 - registers the local engine's status tables
