"""The SageMaker backend: training jobs, FSx for Lustre staging, evaluation and the model registry, through boto3.

One module per service or concern (``training``, ``logs``, ``uploads``, ``fsx``, ``processing``, ``registry``,
``names``, ``cost``, ``clients``). Nothing here imports boto3 at module level, and the SageMaker Python SDK is never
imported at all.
"""

from trainops.backends.sagemaker import vocabulary as vocabulary  # noqa: E402 - registers SageMaker's status tables
