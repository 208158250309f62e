# The image of the trainops Kubeflow Pipelines components (docs/kubeflow.md): `trainops kfp compile` uses it by
# default, as trainops:<version>.
#
#   docker build -t trainops:0.1.0 .                                   # from the repository root (the build context)
#   docker tag trainops:0.1.0 registry.example.com/trainops:0.1.0 && docker push registry.example.com/trainops:0.1.0
#   trainops kfp compile examples/digits/pipeline.yaml -o digits.yaml --image registry.example.com/trainops:0.1.0
#
# What it holds:
# - trainops, installed from its wheel with the extras the components need (EXTRAS), pinned by constraints.txt:
#   aws (boto3: the SageMaker backend, S3 staging), kfp (the component executor), torch and examples (numpy,
#   scikit-learn, matplotlib: the local backend in a pod and the digits example's scripts). A SageMaker-only image
#   can drop the last two (--build-arg EXTRAS=aws,kfp) when its pipeline's own scripts need neither;
# - the pipeline's own files (PIPELINE_DIR, default examples/, which holds examples/digits) below WORKDIR, at the
#   same relative path as in the build context. `trainops kfp compile`, run from the build context, refuses a
#   pipeline whose files would not be here. Your pipeline: --build-arg PIPELINE_DIR=pipelines/fraud.
#
# Each component's command is `python3 -m trainops.components.executor ...` (no shell, no entrypoint of ours): Python
# is the container's first process, so a pod deletion's SIGTERM reaches it and the train component stops its job.
# Nothing is installed when a component starts. It runs as root, like python images and KFP's own: the KFP launcher
# creates artifact paths such as /s3/... and /minio/... in the container.
FROM python:3.11-slim

ARG EXTRAS=aws,kfp,torch,examples
# CPU wheels of torch (the CUDA ones add gigabytes the local backend in a pod does not use); empty for PyPI's.
ARG PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu
ARG PIPELINE_DIR=examples

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    TRAINOPS_HOME=/var/lib/trainops

WORKDIR /opt/trainops

# The wheel first, as a user's `pip install trainops-<version>-py3-none-any.whl` would get it (package data
# included), then the package from it with its extras. The source tree is not kept.
COPY pyproject.toml README.md constraints.txt /tmp/trainops-src/
COPY trainops /tmp/trainops-src/trainops
RUN pip wheel --no-deps --wheel-dir /tmp/dist /tmp/trainops-src \
    && pip install ${PIP_EXTRA_INDEX_URL:+--extra-index-url "$PIP_EXTRA_INDEX_URL"} \
        --constraint /tmp/trainops-src/constraints.txt "$(ls /tmp/dist/trainops-*.whl)[${EXTRAS}]" \
    && rm -rf /tmp/trainops-src /tmp/dist \
    && python -c "import trainops.components.executor, trainops.components.train_task, kfp.dsl.executor, boto3"

COPY ${PIPELINE_DIR} ./${PIPELINE_DIR}
RUN mkdir -p "${TRAINOPS_HOME}"

CMD ["python3", "-m", "trainops.cli", "--help"]
