"""The plug-in points (issue 6): the sampler registry and its options, a sampler registered
from outside the package's modules, statistics named by the schema, the model registry and
the aliases, the compact draw store, weighted summaries, and methods that cannot apply."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import xarray as xr

import bartpy_suite as bps
from bartpy_suite._kernels.cart_chain import run_cart_chain
from bartpy_suite._kernels.records import MoveOut, Moves, make_window
from bartpy_suite.errors import ArgumentError
from bartpy_suite.models import MODELS
from bartpy_suite.posterior.fit import Fit
from bartpy_suite.posterior.weighted import weighted_ess, weighted_mean_sd, weighted_rhat
from bartpy_suite.samplers import SAMPLERS, SamplerSpec, Statistic, register
from bartpy_suite.samplers.mh import GROW_PRUNE_MOVES, CartChain
from bartpy_suite.samplers.single_tree import TreeChain

FAST = dict(chains=2, draws=200, tune=200, seed=7, progress=False)


@pytest.fixture(scope="module")
def cart_fit(cgm):
    return bps.cart("y ~ x1 + x2", data=cgm, sampler="cgm", **FAST)


@pytest.fixture(scope="module")
def bart_fit(cgm):
    return bps.bart("y ~ x1 + x2", data=cgm, trees=8, sampler="cgm", **FAST)


# -- options ---------------------------------------------------------------------------------------
def test_unknown_sampler_option_lists_the_valid_ones(cgm):
    with pytest.raises(ArgumentError, match=r"sampler 'cgm' has no option 'move'; its options are: 'moves', "
                                            r"'change_of_variable', 'perturb_sweep'\. "
                                            r"Did you mean 'moves'\?"):
        bps.cart("y ~ x1 + x2", data=cgm, sampler="cgm", sampler_options={"move": {"grow": 1, "prune": 1}}, **FAST)


def test_sampler_options_must_be_a_dict(cgm):
    with pytest.raises(ArgumentError, match=r"sampler_options must be a dict of option -> value; got list"):
        bps.bart("y ~ x1 + x2", data=cgm, sampler_options=["moves"], **FAST)


def test_moves_given_twice_is_an_error(cgm):
    with pytest.raises(ArgumentError, match="moves is given twice"):
        bps.cart("y ~ x1 + x2", data=cgm, sampler="cgm", moves={"grow": 1, "prune": 1},
                 sampler_options={"moves": {"grow": 1, "prune": 1}}, **FAST)


def test_moves_through_sampler_options_equal_moves_keyword(cgm):
    """The two spellings run the same chain: identical draws for the same seed."""
    moves = {"grow": 0.3, "prune": 0.3, "change": 0.4}
    a = bps.cart("y ~ x1 + x2", data=cgm, sampler="cgm", moves=moves, **FAST)
    b = bps.cart("y ~ x1 + x2", data=cgm, sampler="cgm", sampler_options={"moves": moves}, **FAST)
    np.testing.assert_array_equal(a.posterior["n_leaves"].values, b.posterior["n_leaves"].values)
    np.testing.assert_array_equal(a.idata["trees"]["node_cut"].values, b.idata["trees"]["node_cut"].values)
    assert a.config["sampler_options"] == {"moves": {"grow": 0.3, "prune": 0.3, "change": 0.4, "swap": 0.0,
                                                     "rotate": 0.0, "perturb": 0.0},
                                           "change_of_variable": 0.1, "perturb_sweep": False}


def test_bad_option_value_names_the_option(cgm):
    with pytest.raises(ArgumentError, match=r"moves must give 'grow' a positive weight"):
        bps.cart("y ~ x1 + x2", data=cgm, sampler="cgm", sampler_options={"moves": {"change": 1.0}}, **FAST)


# -- a sampler registered from outside ---------------------------------------------------------------
class StumpChain(TreeChain):
    """A CART 'sampler' that never proposes a move (every move probability 0 but a grow that
    the kernel never draws): the chain stays at the stump. It records no statistics."""

    def __init__(self, problem, rng):
        super().__init__(problem, rng)
        self.move_probs = np.zeros(4)

    def run(self, first_iter, n_iter, tune, thin):
        move = np.zeros(self.draws.n_leaves.shape[0], dtype=np.int8)
        done = 0
        while done < n_iter:
            steps, pending = run_cart_chain(
                self.rng, self.tree, self.data, self.target, Moves(self.move_probs, None, None), self.fstate,
                self.scratch, make_window(first_iter + done, n_iter - done, tune, thin), self.cart_out(),
                MoveOut(move, move))
            done += steps
            if pending >= 0:
                self.record_pending(pending)


@pytest.fixture
def registered():
    """Two samplers registered for the duration of a test: one without statistics, and the MH
    grow/prune chain under another name."""
    stump = register(SamplerSpec("test_stump", "test", "stays at the stump",
                                 builders={"cart": lambda problem, options, rng: StumpChain(problem, rng)},
                                 statistics={"cart": ()}))

    def gp(problem, options, rng):
        return CartChain(problem.codes, problem.is_categorical, problem.nbins, problem.y, problem.ycls,
                         problem.prior, GROW_PRUNE_MOVES, rng)

    mirror = register(SamplerSpec("test_gp", "test", "grow/prune again", builders={"cart": gp},
                                  statistics=SAMPLERS["grow_prune"].statistics, coords=SAMPLERS["grow_prune"].coords))
    yield stump, mirror
    del SAMPLERS["test_stump"], SAMPLERS["test_gp"]


def test_a_registered_sampler_runs_without_other_edits(cgm, registered):
    """One registry entry is enough: the model, the runner and build_fit use it unchanged, and
    the same chain under a new name gives the same draws as grow_prune."""
    fit = bps.cart("y ~ x1 + x2", data=cgm, sampler="test_gp", **FAST)
    ref = bps.cart("y ~ x1 + x2", data=cgm, sampler="grow_prune", **FAST)
    np.testing.assert_array_equal(fit.posterior["n_leaves"].values, ref.posterior["n_leaves"].values)
    np.testing.assert_array_equal(fit.predict(cgm.head())["mean"], ref.predict(cgm.head())["mean"])
    assert fit.config["sampler"] == "test_gp"
    with pytest.raises(ArgumentError, match=r"unknown sampler 'test_gp'; valid options: 'cgm', 'grow_prune'"):
        bps.bart("y ~ x1 + x2", data=cgm, sampler="test_gp", **FAST)


def test_methods_that_cannot_apply_say_why(cgm, registered):
    fit = bps.cart("y ~ x1 + x2", data=cgm, sampler="test_stump", **FAST)
    assert (fit.posterior["n_leaves"].values == 1).all()
    assert set(fit.sample_stats.data_vars) == {"log_posterior", "weight"}
    with pytest.raises(ArgumentError, match=r"acceptance\(\) needs move statistics; sampler 'test_stump' records "
                                            r"log_posterior: see fit.sample_stats"):
        fit.acceptance()
    # moves= belongs to the MH samplers only
    with pytest.raises(ArgumentError, match=r"sampler 'test_stump' has no moves \(its options: none\)"):
        bps.cart("y ~ x1 + x2", data=cgm, sampler="test_stump", moves={"grow": 1, "prune": 1}, **FAST)


def test_statistics_must_match_the_schema(cgm, registered):
    SAMPLERS["test_gp"] = SamplerSpec("test_gp", "test", "", builders=SAMPLERS["test_gp"].builders,
                                      statistics={"cart": (Statistic("move"),)}, coords={})
    with pytest.raises(ValueError, match=r"sampler statistics \['accepted', 'move'\] differ from its schema \['move'\]"):
        bps.cart("y ~ x1 + x2", data=cgm, sampler="test_gp", **FAST)


def test_statistics_carry_the_schema_dims_and_coords(bart_fit):
    stats = bart_fit.sample_stats
    assert stats["n_proposed"].dims == ("chain", "draw", "move")
    assert list(stats["move"].values) == ["grow", "prune", "change", "swap", "rotate", "perturb"]
    assert bart_fit.acceptance().index.tolist() == ["grow", "prune", "change", "swap"]


def test_bart_defaults_to_grow_prune_and_cart_to_tempered(cgm):
    fit = bps.bart("y ~ x1 + x2", data=cgm, trees=8, **FAST)
    assert fit.config["sampler"] == "grow_prune"
    assert fit.acceptance().index.tolist() == ["grow", "prune"]
    assert bps.BayesianCART().spec.name == "tempered"  # benchmarks/results/first_hour.md


def test_change_and_swap_moves_under_the_bart_default_name_the_sampler_that_has_them(cgm):
    with pytest.raises(ArgumentError, match=r"sampler 'grow_prune' has no change or swap move \(moves got 'change', "
                                            r"'swap'\): use sampler='cgm'"):
        bps.bart("y ~ x1 + x2", data=cgm, trees=4, moves={"grow": 0.25, "prune": 0.25, "change": 0.4, "swap": 0.1},
                 **FAST)


# -- models and aliases ----------------------------------------------------------------------------
def test_aliases_take_the_model_keywords_and_docstrings():
    for name, cls in MODELS.items():
        alias = getattr(bps, name)
        params = inspect.signature(alias).parameters
        keywords = [p.name for p in cls.keyword_parameters()]
        assert list(params)[:3] == ["formula", "data", "na_action"]
        assert list(params)[3:] == keywords
        for keyword in keywords:
            assert f"\n{keyword}" in alias.__doc__ or f", {keyword}" in alias.__doc__, (name, keyword)
        assert "sampler_options" in keywords


def test_from_formula_equals_the_alias(cgm, cart_fit):
    fit = bps.BayesianCART.from_formula("y ~ x1 + x2", cgm, sampler="cgm", **FAST)
    np.testing.assert_array_equal(fit.posterior["n_leaves"].values, cart_fit.posterior["n_leaves"].values)


# -- trees: map_tree, tree(), the compact store ----------------------------------------------------
def test_map_tree_on_bart_says_why_and_tree_prints_one(bart_fit):
    with pytest.raises(ArgumentError, match=r"map_tree needs the log posterior of each draw, which a bart fit does "
                                            r"not record .* fit\.tree\(chain=0, draw=0, tree=j\)"):
        bart_fit.map_tree()
    text = str(bart_fit.tree(chain=1, draw=5, tree=7))
    assert text.startswith("Tree 7 of chain 1, draw 5")
    n_leaves = int(bart_fit.posterior["n_leaves"].values[1, 5, 7])
    assert sum(line.endswith(" *") for line in text.splitlines()) == n_leaves
    with pytest.raises(ArgumentError, match=r"tree must be an integer in 0\.\.7; got 8"):
        bart_fit.tree(tree=8)


def test_map_tree_is_the_draw_of_largest_log_posterior(cart_fit):
    lp = cart_fit.sample_stats["log_posterior"].values
    c, d = np.unravel_index(np.argmax(lp), lp.shape)
    map_text = str(cart_fit.map_tree()).splitlines()
    same = str(cart_fit.tree(chain=int(c), draw=int(d))).splitlines()
    assert map_text[1:] == same[1:]
    with pytest.raises(ArgumentError, match=r"tree must be an integer in 0\.\.0; got 1"):
        cart_fit.map_tree(tree=1)


@pytest.mark.parametrize("which", ["cart_fit", "bart_fit"])
def test_store_holds_exactly_the_nodes_of_the_kept_trees(which, request):
    """No padding: the trees group holds sum(2 n_leaves - 1) nodes, leaf values only at leaves,
    and the padded view agrees with it."""
    fit = request.getfixturevalue(which)
    store = fit.idata["trees"]
    n_leaves = fit.posterior["n_leaves"].values
    assert store.sizes["node"] == int((2 * n_leaves - 1).sum())
    np.testing.assert_array_equal(store["tree_nodes"].values.reshape(n_leaves.shape), 2 * n_leaves - 1)
    var = store["node_var"].values
    value = store["node_value"].values
    assert np.isfinite(value[var == -1]).all() and np.isnan(value[var >= 0]).all()
    padded = fit.tree_arrays()
    assert ((padded["split_var"].values == -1).sum(axis=-1) == n_leaves.reshape(padded["split_var"].shape[:3])).all()


def test_store_grows_past_its_first_room_without_changing_draws(cgm):
    """A long fit grows the store several times; the draws equal a fit whose kept draws were
    all recorded at once (same seed: one chain of 3,000 draws vs its first 1,000)."""
    kw = dict(sampler="cgm", chains=1, tune=100, seed=3, progress=False)
    long = bps.cart("y ~ x1 + x2", data=cgm, draws=3000, **kw)
    short = bps.cart("y ~ x1 + x2", data=cgm, draws=1000, **kw)
    np.testing.assert_array_equal(long.posterior["n_leaves"].values[:, :1000], short.posterior["n_leaves"].values)
    a = long.tree_arrays().isel(draw=slice(0, 1000))
    b = short.tree_arrays()
    width = b.sizes["node"]
    np.testing.assert_array_equal(a["split_cut"].values[..., :width], b["split_cut"].values)
    assert (a["split_var"].values[..., width:] == -2).all()


def test_saved_fit_is_compact_and_predicts_exactly(bart_fit, cgm, tmp_path):
    path = tmp_path / "fit.nc"
    bart_fit.to_netcdf(path)
    with xr.open_datatree(path, engine="netcdf4") as tree:
        assert tree["trees"]["node_var"].dtype == np.int8
        assert tree["trees"]["tree_nodes"].dtype == np.int8
        assert tree["trees"]["node_value"].encoding["zlib"]
    back = bps.load(path)
    np.testing.assert_array_equal(back.predict(cgm.head(30))["mean"], bart_fit.predict(cgm.head(30))["mean"])
    np.testing.assert_array_equal(back.tree_arrays()["split_cut"].values, bart_fit.tree_arrays()["split_cut"].values)


# -- weighted summaries ------------------------------------------------------------------------------
def with_weights(fit: Fit, weights: np.ndarray) -> Fit:
    idata = fit.idata.copy(deep=True)
    idata["sample_stats"]["weight"] = xr.DataArray(weights, dims=("chain", "draw"))
    return Fit(idata, design=fit.design)


def test_summary_honours_known_weights(cart_fit):
    """Every column of summary() uses the weights: mean, sd, ESS and R-hat equal the weighted
    estimators on the same arrays (exact), and doubling every weight changes nothing."""
    rng = np.random.default_rng(5)
    w = rng.lognormal(sigma=1.0, size=cart_fit.sample_stats["weight"].shape)
    fit = with_weights(cart_fit, w)
    table = fit.summary()
    arr = cart_fit.posterior["n_leaves"].values.astype(float)
    mean, sd = weighted_mean_sd(arr, w)
    row = table.loc["n_leaves"]
    assert row["mean"] == pytest.approx(mean, rel=1e-12) and row["sd"] == pytest.approx(sd, rel=1e-12)
    assert row["ess_bulk"] == pytest.approx(weighted_ess(arr, w), rel=1e-12)
    assert row["r_hat"] == pytest.approx(weighted_rhat(arr, w), rel=1e-12)
    assert np.isnan(row["ess_tail"])
    assert row["mean"] != pytest.approx(cart_fit.summary().loc["n_leaves", "mean"], rel=1e-6)
    pd_equal = with_weights(cart_fit, 2 * w).summary()
    np.testing.assert_allclose(pd_equal.to_numpy(), table.to_numpy(), rtol=1e-10, equal_nan=True)
