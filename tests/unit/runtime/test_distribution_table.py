"""The runtime's one table of distribution types (`trainops.runtime.distributions`) against the spec's models: a type
the spec accepts must be one the runtime plans, with the launcher both sides agree on."""

from __future__ import annotations

import typing

import pytest

from trainops.runtime import distributions
from trainops.runtime.hyperparameters import DISTRIBUTION_FIELDS, normalize_distribution
from trainops.runtime.plan import distribution_kind
from trainops.spec.distribution import TypedDistribution

VARIANTS = typing.get_args(typing.get_args(TypedDistribution)[0])


def test_every_spec_variant_has_one_row_and_every_row_a_variant():
    spec_types = {variant.model_fields["type"].default for variant in VARIANTS}
    assert spec_types == set(distributions.TYPES) == set(DISTRIBUTION_FIELDS)


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda variant: variant.__name__)
def test_the_runtime_launches_what_the_spec_says(variant):
    model = variant()
    canonical = normalize_distribution(model.to_canonical(), "test")
    expected = {"none": "plain"}.get(model.launcher, model.launcher)
    assert distribution_kind(canonical) == expected


def test_a_choice_type_takes_its_launcher_from_the_distribution_and_refuses_others():
    from trainops.runtime.hyperparameters import DistributionError

    for name in distributions.names_where(launch="choice"):
        for launcher in distributions.TYPES[name].launchers:
            assert distribution_kind(normalize_distribution({"type": name, "launcher": launcher}, "t")) == launcher
        with pytest.raises(DistributionError, match="launcher must be one of"):
            normalize_distribution({"type": name, "launcher": "srun"}, "t")


def test_the_derived_lists_are_the_tables_rows():
    from trainops.runtime import context, mpi_plan, parallel, plan

    assert set(parallel.DATA_PARALLEL_TYPES) == {"none", "torch_distributed", "mpi", "smddp", "pytorchddp",
                                                 "pytorchxla"}
    assert set(parallel.OTHER_FRAMEWORK_TYPES) == {"parameter_server", "multi_worker_mirrored_strategy"}
    assert set(context._SMDDP_TYPES) == set(mpi_plan._SMDDP_TYPES) == set(plan._SMDDP_TYPES) == {"smddp",
                                                                                                 "pytorchddp"}
