"""The rule registry is the one list of rules: everything that names rules reads it."""

from __future__ import annotations

import pytest
from tests.naive import ORACLES, naive_run

import distlearn
from distlearn.estimators import ESTIMATORS, OBPM
from distlearn.learners import RULES, make_rule
from distlearn.learners import _kernels as K
from distlearn.training import MODELS, make_estimator

#: Parameters a rule cannot default (the margin perceptron's horizon and radius).
REQUIRED = {"margin": {"horizon": 10, "radius": 1.0}}


def test_every_rule_has_an_oracle_and_nothing_else_does():
    assert set(ORACLES) == set(RULES)
    assert {n for n, (_, native) in ORACLES.items() if native is not None} == {n for n, s in RULES.items() if s.native}


@pytest.mark.parametrize("name", sorted(RULES))
def test_rule_entry_reaches_kernel_estimator_cli_and_obpm(name):
    spec = RULES[name]
    rule = make_rule(name, **REQUIRED.get(name, {}))
    assert rule.name == name and 0 <= rule.code < K.FIRST_NATIVE  # a binary kernel code
    if spec.native:
        assert make_rule(name, native=True).code >= K.FIRST_NATIVE
    cls = getattr(distlearn, spec.estimator)
    assert ESTIMATORS[name] is cls
    assert cls()._rule(2)[0] == name  # the estimator runs this rule
    assert name in MODELS and MODELS[name] == spec.summary
    assert type(make_estimator(name)) is cls
    assert OBPM(base=name)._check_params() is None  # base= accepts every registered rule


def test_oracle_runs_for_every_rule():
    X = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [-1.0, 0.5]]
    y = [1, 0, 1, 0]
    for name in RULES:
        run = naive_run(name, REQUIRED.get(name, {}), X, y, 1)
        assert len(run.mistake) == len(y) and len(run.updated) == len(y)


def test_unknown_rule_names_the_registry():
    with pytest.raises(ValueError, match="unknown rule 'nope'; choose one of"):
        make_rule("nope")
    with pytest.raises(ValueError, match="base must be one of"):
        OBPM(base="nope").fit([[0.0], [1.0]], [0, 1])
