"""scikit-learn's estimator contract, run over every distlearn estimator."""

from __future__ import annotations

from sklearn.utils.estimator_checks import parametrize_with_checks

import distlearn

ESTIMATORS = [
    distlearn.Perceptron(random_state=0),
    distlearn.GeneralizedPerceptron(rho=0.1, random_state=0),
    distlearn.MarginPerceptron(random_state=0),
    distlearn.ALMA(random_state=0),
    distlearn.ROMMA(random_state=0),
    distlearn.ROMMA(aggressive=True, random_state=0),
    distlearn.PassiveAggressive(random_state=0),
    distlearn.PassiveAggressive(variant="PA-II", multiclass="native", random_state=0),
    distlearn.MIRA(random_state=0),
    distlearn.MIRA(multiclass="ovr", random_state=0),
    distlearn.LMS(random_state=0),
]

#: Checks we are known to fail, with the reason.  Empty: every check passes.
EXPECTED_FAILED: dict[str, str] = {}


@parametrize_with_checks(ESTIMATORS, expected_failed_checks=lambda est: EXPECTED_FAILED)
def test_sklearn_contract(estimator, check):
    check(estimator)
