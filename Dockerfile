# The image of the trainops Kubeflow Pipelines components (docs/kubeflow.md).
#
# It holds trainops with its aws and kfp extras (boto3 for the SageMaker backend, kfp for the component executor),
# pinned by constraints.txt, and a copy of the repository's examples. WORKDIR is the repository root, so a pipeline
# compiled from the checkout (`trainops kfp compile examples/digits/pipeline.yaml ...`, pipeline_dir
# examples/digits) finds its files here.
#
#   docker build -t registry.example.com/trainops:0.1.0 .
#   docker push registry.example.com/trainops:0.1.0
#   trainops kfp compile examples/digits/pipeline.yaml -o digits.yaml --image registry.example.com/trainops:0.1.0
#
# The local backend inside a pod (small jobs, simulated hosts) also needs torch and the examples' packages:
#   docker build --build-arg EXTRAS=aws,kfp,torch,examples \
#                --build-arg PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu -t .../trainops-local:0.1.0 .
#
# It runs as root, like python images and KFP's own: the KFP launcher creates artifact paths such as /s3/... and
# /minio/... in the container.
FROM python:3.11-slim

ARG EXTRAS=aws,kfp
ARG PIP_EXTRA_INDEX_URL=

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    TRAINOPS_HOME=/var/lib/trainops

WORKDIR /opt/trainops

# Dependencies first (they change less often than the code), then the package itself.
COPY pyproject.toml README.md constraints.txt ./
COPY trainops ./trainops
RUN pip install ${PIP_EXTRA_INDEX_URL:+--extra-index-url "$PIP_EXTRA_INDEX_URL"} \
        --constraint constraints.txt ".[${EXTRAS}]" \
    && python -c "import trainops.components.train_task, kfp.dsl.executor_main, boto3"

COPY examples ./examples
RUN mkdir -p "${TRAINOPS_HOME}"

# KFP runs each component as `sh -c ... python3 -m kfp.dsl.executor_main ...`; no entrypoint of our own.
CMD ["python3", "-m", "trainops.cli", "--help"]
