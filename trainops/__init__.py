"""trainops: distributed training as a typed step of Airflow DAGs, Kubeflow pipelines and scheduled retraining.

This module imports nothing heavy: DAG files import `trainops.operators`, which must parse fast.
"""

__version__ = "0.1.0"
