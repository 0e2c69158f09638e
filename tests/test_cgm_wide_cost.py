"""``tree.prior_rule_counts``, the per-node rule counts of the tree prior built from each predictor's
exceptions (``tree.mode_exceptions``), against the fused histogram of ``tree.node_rule_counts``
that it stands in for, and a cgm BART chain run on both paths.

The counts are integers (stored as floats), so the two paths must agree exactly: every check
here is an equality, not a tolerance. The cost the path removes is measured in
``benchmarks/cgm_wide_cost.py`` (``benchmarks/results/cgm_wide_cost.md``); no test times anything.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd
import pytest
from _chains import bart_chain, run_padded
from numba import njit

import bartpy_suite as bps
from bartpy_suite._kernels import tree as T
from bartpy_suite._kernels.backfit import SIGMA_SAMPLED
from bartpy_suite._kernels.likelihood import MODEL_NORMAL_KNOWN_VARIANCE
from bartpy_suite.priors import TreePrior, kernel_prior
from bartpy_suite.samplers import SAMPLERS


@njit
def _both(perm, start, end, is_cat, nbins, m, scratch, na):
    """(fused count, its per-variable arrays, exception-path count, its arrays) at one segment."""
    a = T.node_rule_counts(perm, start, end, is_cat, nbins, m, scratch, na)
    fused = (scratch.counts.copy(), scratch.lows.copy(), scratch.extras.copy())
    b = T.prior_rule_counts(perm, start, end, is_cat, nbins, m, scratch, na)
    return a, fused, b, (scratch.counts.copy(), scratch.lows.copy(), scratch.extras.copy())


def sparse_codes(rng, n, p, na):
    """(codes (p, n), is_cat, nbins): mostly one code per predictor, as 0/1 indicators and counts
    are, with a few dense numeric and categorical columns; with ``na`` some codes are missing
    (code ``nbins[v]``), in one column most of them, so that a mode can be the missing code."""
    codes = np.zeros((p, n), dtype=np.int32)
    nbins = np.zeros(p, dtype=np.int64)
    is_cat = np.zeros(p, dtype=bool)
    for v in range(p):
        kind = v % 6
        if kind == 0:  # dense numeric
            nbins[v] = 12
            codes[v] = rng.integers(0, 12, n)
        elif kind == 1:  # factor of 4 levels, one common
            is_cat[v] = True
            nbins[v] = 4
            codes[v] = np.where(rng.random(n) < 0.9, 2, rng.integers(0, 4, n))
        elif kind == 2:  # constant
            nbins[v] = 2
        else:  # rare indicator on a wide grid (as the paper's 100-cut grid bins a 0/1 column)
            nbins[v] = 101
            codes[v] = np.where(rng.random(n) < rng.choice([0.002, 0.02, 0.1]), 100, 0)
        if na:
            share = 0.8 if v == 3 else 0.03
            codes[v] = np.where(rng.random(n) < share, nbins[v], codes[v])
    return codes, is_cat, nbins


def test_mode_exceptions_lists_the_rows_off_each_predictors_most_common_code(monkeypatch):
    codes = np.array([[0, 1, 1, 0, 1, 2], [3, 3, 3, 3, 3, 3], [0, 0, 1, 1, 2, 2]], dtype=np.int32)
    monkeypatch.setattr(T, "EXCEPTION_SHARE", 0.5)  # 7 of these 18 codes are exceptions
    ex = T.mode_exceptions(codes)
    assert ex["ex_mode"].tolist() == [1, 3, 0]  # ties go to the smallest code
    ptr, rows, ex_codes = ex["ex_ptr"], ex["ex_row"], ex["ex_code"]
    assert ptr.tolist() == [0, 3, 3, 7]
    assert rows[0:3].tolist() == [0, 3, 5] and ex_codes[0:3].tolist() == [0, 0, 2]
    assert rows[3:7].tolist() == [2, 3, 4, 5] and ex_codes[3:7].tolist() == [1, 1, 2, 2]
    monkeypatch.setattr(T, "EXCEPTION_SHARE", 0.25)
    empty = T.mode_exceptions(codes)  # 7 / 18 > 0.25: too dense, kept empty
    assert empty["ex_ptr"].size == 0 and empty["ex_row"].size == 0 and empty["ex_code"].size == 0
    assert T.mode_exceptions(codes)["ex_mode"].tolist() == [1, 3, 0]


@pytest.mark.parametrize("na", [False, True])
def test_prior_rule_counts_equal_the_fused_histogram_counts(na, monkeypatch):
    """Random data and random row segments (sorted, as a node's rows are) for min_leaf_size 1, 2
    and 5: the same return value, counts, lows and extras, the sparse path taken at the large
    segments, and the row flags left clear for ``sort_segment``. (The dense columns here put up to
    a fifth of the codes off their mode: ``EXCEPTION_SHARE`` is raised so the exceptions are kept.)"""
    monkeypatch.setattr(T, "EXCEPTION_SHARE", 0.5)
    rng = np.random.default_rng(20261127)
    taken = 0
    for trial in range(12):
        n, p = int(rng.integers(40, 400)), int(rng.integers(6, 60))
        codes, is_cat, nbins = sparse_codes(rng, n, p, na)
        scratch = T.new_scratch(codes, 15, nbins, model=MODEL_NORMAL_KNOWN_VARIANCE)
        assert scratch.ex_ptr.size == p + 1
        for m in (1, 2, 5):
            for size in (n, n // 2, n // 5, 2 * m, 2 * m - 1, 3):
                rows = np.sort(rng.choice(n, size, replace=False)).astype(np.int32)
                perm = np.concatenate([rows, np.setdiff1d(np.arange(n), rows)]).astype(np.int32)
                start = int(rng.integers(0, n - size + 1))
                perm = np.roll(perm, start)  # the segment need not start at 0
                a, fused, b, sparse = _both(perm, start, start + size, is_cat, nbins, m, scratch, na)
                assert a == b, (trial, m, size)
                for x, y in zip(fused, sparse):
                    np.testing.assert_array_equal(x, y)
                assert not scratch.row_flag.any()
                taken += scratch.ex_ptr[p] + 2 * size < size * p and size >= 2 * m
    assert taken >= 60  # most large segments went through the exception path


def test_cgm_bart_draws_are_the_same_on_both_paths(monkeypatch):
    """A cgm BART chain (change and swap score the tree prior of whole subtrees) on sparse data:
    the same kept trees, leaves and sigma with the exceptions as with the fused histogram only."""
    monkeypatch.setattr(T, "EXCEPTION_SHARE", 0.5)
    rng = np.random.default_rng(7)
    n, p = 300, 48
    codes, is_cat, nbins = sparse_codes(rng, n, p, False)
    y = 0.8 * (codes[3] > 0) + (codes[0] > 5) + 0.3 * rng.normal(size=n)
    hyper = kernel_prior(TreePrior(0.95, 2.0, 1), None, likelihood=True, tau2=0.1,
                         model_code=MODEL_NORMAL_KNOWN_VARIANCE)
    moves = SAMPLERS["cgm"].option_defaults()["moves"]
    outs = []
    for keep_exceptions in (True, False):
        chain = bart_chain(codes, is_cat, nbins, y, hyper, moves, np.random.default_rng(3), 10, SIGMA_SAMPLED)
        assert chain.scratch.ex_ptr.size == p + 1
        if not keep_exceptions:
            chain.scratch = chain.scratch._replace(ex_ptr=np.zeros(0, dtype=np.int64))
        outs.append(run_padded(chain, 40, 0, 80, 40, 1))
    for key in ("split_var", "split_cut", "leaf_value", "sigma"):
        np.testing.assert_array_equal(np.asarray(outs[0][key]), np.asarray(outs[1][key]))
    assert np.asarray(outs[0]["n_leaves"]).mean() > 1.5  # trees with splits: change and swap had work


def _wide_sparse_frame(seed: int, n: int = 160, p: int = 24) -> pd.DataFrame:
    """Mostly rare 0/1 indicators (as grants' are), two dense correlated numerics (so that
    CHANGE-OF-VARIABLE has a partner to move to) and a factor with one common level."""
    rng = np.random.default_rng(seed)
    cols = {}
    for v in range(p):
        cols[f"b{v}"] = (rng.random(n) < (0.02, 0.05, 0.15)[v % 3]).astype(float)
    x = rng.normal(size=n)
    cols["x"] = x
    cols["xc"] = x + 0.3 * rng.normal(size=n)
    cols["f"] = pd.Categorical(np.where(rng.random(n) < 0.7, "a", rng.choice(["b", "c", "d"], n)))
    df = pd.DataFrame(cols)
    df["y"] = df["b2"] + (df["x"] > 0) + 2.0 * df["f"].isin(["b", "c"]) + 0.3 * rng.normal(size=n)
    return df


def _all_draws(fit) -> dict:
    """Every data variable of every group of the fit (as ``draw_fingerprints._hash_fit`` hashes)."""
    return {f"{node.path}/{name}": np.asarray(node.ds[name].values)
            for node in fit.idata.subtree for name in node.ds.data_vars}


@pytest.mark.parametrize("model, sampler, options", [
    ("bart", "pg", {"ancestor_sampling": True}),  # _rule_log_prior, factor rules included
    ("bart", "ctmc", {"rotate": True, "perturb": True, "change_of_variable": 0.5}),  # birth / death rates, CHGV
    ("bart", "cgm", {"moves": {"grow": 0.25, "prune": 0.25, "rotate": 0.25, "perturb": 0.25},
                     "change_of_variable": 0.5}),  # rotate.change_of_variable_step
    ("cart", "smc", {"proposal": "optimal"}),  # particle_proposal.optimal_choice
])
def test_other_samplers_draw_the_same_on_both_rule_count_paths(model, sampler, options, monkeypatch):
    """The same fit on sparse data with the exceptions kept (``prior_rule_counts`` takes the
    exception path at the large nodes) and with none kept (the fused histogram at every node):
    every draw and statistic equal. ``mode_exceptions`` is wrapped to check that the first fit
    kept them."""
    df = _wide_sparse_frame(11)
    kept = []
    mode_exceptions = T.mode_exceptions

    def recording(codes):
        out = mode_exceptions(codes)
        kept.append(out["ex_ptr"].size == codes.shape[0] + 1)
        return out

    monkeypatch.setattr(T, "mode_exceptions", recording)
    if model == "bart":
        run = dict(trees=6, draws=15, tune=10, chains=1, seed=5)
    else:
        run = dict(draws=20, chains=1, seed=5)
    draws = []
    for share in (0.5, -1.0):  # -1: no share is small enough, nothing kept
        monkeypatch.setattr(T, "EXCEPTION_SHARE", share)
        kept.clear()
        fit = getattr(bps, model)("y ~ .", data=df, sampler=sampler, sampler_options=options, progress=False,
                                  check_mixing=False, **run)
        assert kept and all(kept) == (share > 0), kept
        draws.append(_all_draws(fit))
    assert draws[0].keys() == draws[1].keys()
    for key in draws[0]:
        np.testing.assert_array_equal(draws[0][key], draws[1][key], err_msg=key)


class _Segment(NamedTuple):
    """What ``particle._rule_log_prior`` reads of a particle's tree: its row order and segments."""

    perm: np.ndarray
    start: np.ndarray
    end: np.ndarray


class _MinLeaf(NamedTuple):
    min_leaf: int


class _Target(NamedTuple):
    prior: _MinLeaf


@njit
def _rule_log_prior_from_histograms(t, node, v, cut, is_cat, nbins, m, scratch):
    """``particle._rule_log_prior`` as it was: counts and a factor's left-hand rows from the fused
    per-variable histograms of ``node_rule_counts``."""
    s0, e0 = t.start[node], t.end[node]
    n_vars = T.node_rule_counts(t.perm, s0, e0, is_cat, nbins, m, scratch, False)
    count = scratch.counts[v]
    if count <= 0:
        return -np.inf
    if is_cat[v]:
        left = 0
        for k in range(nbins[v]):
            if (cut >> k) & 1:
                left += scratch.hist2d[v, k]
        if left < m or left > (e0 - s0) - m:
            return -np.inf
    else:
        lo = scratch.lows[v]
        if cut < lo or cut >= lo + count:
            return -np.inf
    return T.rule_log_prob(n_vars, count, scratch.extras[v], is_cat[v])


def test_pg_rule_log_prior_equals_its_histogram_version():
    """pg's ancestor-sampling weights score the reference's rules with ``_rule_log_prior``, which
    now counts a factor's left-hand rows from its codes instead of the fused histograms: random
    sparse data, segments, rules (available or not) and min_leaf_size, the same log prior."""
    from bartpy_suite._kernels.particle import _rule_log_prior

    rng = np.random.default_rng(20261128)
    finite = infinite = factors = 0
    for trial in range(6):
        n, p = int(rng.integers(60, 300)), int(rng.integers(6, 40))
        codes, is_cat, nbins = sparse_codes(rng, n, p, False)
        scratch = T.new_scratch(codes, 15, nbins, model=MODEL_NORMAL_KNOWN_VARIANCE)
        for m in (1, 3):
            for size in (n, n // 3, 2 * m + 1):
                start = int(rng.integers(0, n - size + 1))
                seg = _Segment(rng.permutation(n).astype(np.int32), np.array([start], dtype=np.int64),
                               np.array([start + size], dtype=np.int64))
                for _ in range(20):
                    v = int(rng.integers(0, p))
                    if is_cat[v]:
                        cut = int(rng.integers(1, 2 ** nbins[v] - 1))
                        factors += 1
                    else:
                        cut = int(rng.integers(0, nbins[v]))
                    want = _rule_log_prior_from_histograms(seg, 0, v, np.int64(cut), is_cat, nbins, m, scratch)
                    got = _rule_log_prior(seg, 0, v, np.int64(cut), is_cat, nbins, _Target(_MinLeaf(m)), scratch)
                    assert got == want, (trial, m, size, v, cut)
                    finite += np.isfinite(got)
                    infinite += not np.isfinite(got)
    assert finite > 50 and infinite > 50 and factors > 50  # both outcomes, factor rules among them
