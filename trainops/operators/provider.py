"""The Airflow provider description of trainops (the ``apache_airflow_provider`` entry point of pyproject.toml).

Airflow's ProvidersManager calls `get_provider_info()` for every installed distribution that declares the entry
point, at start-up of every Airflow process (and `airflow providers list` shows the result). A broken import here
breaks Airflow itself, so this module imports nothing at all: it only returns a dictionary of names.
"""

from __future__ import annotations

INTEGRATION = "trainops"


def get_provider_info() -> dict:
    """What Airflow needs to know about the trainops provider: its package, operators, triggers and extra links."""
    return {
        # Must equal the distribution's (canonical) name, or ProvidersManager refuses the provider.
        "package-name": "trainops",
        "name": "trainops",
        "description": "Typed distributed deep-learning training on any trainops backend (local, Amazon SageMaker, "
                       "or an installed one) as Airflow operators: stage data, train with re-attach on retry, "
                       "evaluate against a gate, register.\n",
        "integrations": [
            {
                "integration-name": INTEGRATION,
                "external-doc-url": "https://github.com/trainops/trainops/blob/main/docs/airflow.md",
                "tags": ["aws", "ml"],
            }
        ],
        "operators": [
            {
                "integration-name": INTEGRATION,
                "python-modules": [
                    "trainops.operators.stage",
                    "trainops.operators.training",
                    "trainops.operators.evaluate",
                    "trainops.operators.register",
                ],
            }
        ],
        "triggers": [
            {"integration-name": INTEGRATION, "python-modules": ["trainops.operators.triggers"]},
        ],
        "extra-links": [f"trainops.operators.links.{name}" for name in (
            "TrainingJobLink", "TrainingLogsLink", "EvaluationJobLink", "EvaluationReportLink", "ModelVersionLink")],
    }
