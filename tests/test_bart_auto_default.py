"""BART's default run (issue 32): ``init``, ``tune`` and ``draws`` are "auto" and are decided from the
data at fit time (``models/bart.py``, ``AUTO_*``): a GFR warm start with 100 + 500 sweeps for a
regression fit of at least 10,000 rows, 1000 + 1000 sweeps from stumps otherwise."""

from __future__ import annotations

import numpy as np
import pytest

import bartpy_suite as bps
from bartpy_suite.errors import ArgumentError
from bartpy_suite.models import bart as bart_module

FAST = dict(trees=5, chains=2, progress=False, check_mixing=False, seed=3)


def resolved(model, rows, warm_ok=True):
    m = model._resolved(rows, warm_ok)
    return m.init, m.tune, m.draws


def test_defaults_are_auto_and_survive_get_params():
    model = bps.BART()
    assert (model.init, model.tune, model.draws) == ("auto", "auto", "auto")
    sklearn = pytest.importorskip("sklearn")
    from bartpy_suite.sklearn import BARTRegressor

    est = sklearn.base.clone(BARTRegressor())
    assert est.get_params()["tune"] == "auto" and est.get_params()["init"] == "auto"


def test_rule_by_rows():
    model = bps.BART()
    assert resolved(model, bart_module.AUTO_WARM_MIN_ROWS) == ("gfr", 100, 500)
    assert resolved(model, bart_module.AUTO_WARM_MIN_ROWS - 1) == (None, 1000, 1000)
    # a response or option the warm start does not support keeps the stump start
    assert resolved(model, 10 ** 6, warm_ok=False) == (None, 1000, 1000)


def test_explicit_settings_win():
    assert resolved(bps.BART(tune=7, draws=9), 10 ** 5) == ("gfr", 7, 9)
    assert resolved(bps.BART(init=None), 10 ** 5) == (None, 1000, 1000)
    # an explicit warm start gets the short tuning at any size, the short run only at 10,000 rows or more
    assert resolved(bps.BART(init="gfr"), 500) == ("gfr", 100, 1000)
    assert resolved(bps.BART(init="gfr"), 10 ** 5) == ("gfr", 100, 500)


@pytest.mark.parametrize("keywords", [dict(sampler="pg"), dict(sampler="ctmc"), dict(sampler="gfr"),
                                      dict(sparse=True)])
def test_samplers_and_options_without_a_warm_start(keywords):
    assert resolved(bps.BART(**keywords), 10 ** 5) == (None, 1000, 1000)


def test_model_is_not_changed_by_resolving():
    model = bps.BART()
    model._resolved(10 ** 5, True)
    assert (model.init, model.tune, model.draws) == ("auto", "auto", "auto")


def test_fit_records_what_auto_decided(monkeypatch):
    """End to end with the threshold lowered (a 10,000-row fit would make the test slow): a
    regression fit is warm-started with 100 + 500 sweeps, a binary response is not."""
    monkeypatch.setattr(bart_module, "AUTO_WARM_MIN_ROWS", 200)
    rng = np.random.default_rng(0)
    x = rng.uniform(size=(300, 3))
    y = 3 * x[:, 0] + rng.normal(size=300)
    fit = bps.BART(**FAST).fit(x, y)
    assert {k: fit.config.get(k) for k in ("init", "tune", "draws")} == {"init": "gfr", "tune": 100, "draws": 500}
    assert fit.posterior["sigma"].shape == (2, 500)
    probit = bps.BART(**FAST).fit(x, (y > 1.5).astype(int), class_labels=[0, 1])
    assert probit.config.get("init") is None and (probit.config["tune"], probit.config["draws"]) == (1000, 1000)
    small = bps.BART(**FAST).fit(x[:150], y[:150])
    assert small.config.get("init") is None and (small.config["tune"], small.config["draws"]) == (1000, 1000)


def test_auto_is_refused_where_the_model_has_no_rule():
    with pytest.raises(ArgumentError, match="tune"):
        bps.BayesianCART(tune="auto")
