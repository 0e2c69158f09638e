"""CT-MCMC's birth rates on sparse data (``ctmc._bin_rows_sparse``, ``ctmc._rows_available``)
against the paths they stand in for (``_bin_rows``' counting sort, ``tree.has_available_rule``),
and whole ``ctmc`` fits run on both.

The sparse paths exist for speed only (``benchmarks/ctmc_wide_cost.py``,
``benchmarks/results/ctmc_wide_cost.md``): every bin count, sum and sorted row, every availability
answer and every draw must be the same numbers, so every check here is an equality, not a
tolerance. No test times anything.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from numba import njit

import bartpy_suite as bps
from bartpy_suite._kernels import ctmc as C
from bartpy_suite._kernels import tree as T
from bartpy_suite._kernels.likelihood import MODEL_CLASSIFICATION, MODEL_MEAN_SHIFT, MODEL_NORMAL_KNOWN_VARIANCE
from bartpy_suite._kernels.records import Data, make_target
from bartpy_suite.priors import TreePrior, kernel_prior
from bartpy_suite.samplers.registry import SamplerSpec


def sparse_codes(rng, n, p, dense=True):
    """(codes (p, n), is_cat, nbins): mostly one code per predictor (rare indicators on a wide
    grid, as the paper's 100-cut grid bins grants' 0/1 columns; counts), a few dense numeric
    columns (rare indicators instead unless ``dense``), factors with one common level and constant
    columns."""
    codes = np.zeros((p, n), dtype=np.int32)
    nbins = np.zeros(p, dtype=np.int64)
    is_cat = np.zeros(p, dtype=bool)
    for v in range(p):
        kind = v % 6
        if kind == 0 and dense:  # dense numeric
            nbins[v] = 12
            codes[v] = rng.integers(0, 12, n)
        elif kind == 1:  # factor of 4 levels, one common
            is_cat[v] = True
            nbins[v] = 4
            codes[v] = np.where(rng.random(n) < 0.9, 2, rng.integers(0, 4, n))
        elif kind == 2:  # constant
            nbins[v] = 2
        elif kind == 3:  # small counts, mostly 1
            nbins[v] = 6
            codes[v] = np.where(rng.random(n) < 0.85, 1, rng.integers(0, 6, n))
        else:  # rare indicator
            nbins[v] = 101
            codes[v] = np.where(rng.random(n) < rng.choice([0.005, 0.03, 0.1]), 100, 0)
    return codes, is_cat, nbins


@njit
def _availability_both(data, rows, start, end, m, scratch, cs):
    old = T.has_available_rule(data.xt, rows, start, end, data.is_cat, data.nbins, m, scratch.hist, scratch.sums,
                               False)
    new = C._rows_available(data, rows, start, end, m, scratch, cs)
    return old, new


def test_rows_available_answers_as_has_available_rule(monkeypatch):
    """Random sparse data and row sets of every size up to beyond ``SMALL_SET``, min_leaf_size 1, 2
    and 5, sets drawn among the rows off one predictor's mode (the small sides a rare code splits
    off a leaf, often without any available rule) and at random: the same answer every time, both
    answers seen, and the row-wise comparison taken."""
    monkeypatch.setattr(T, "EXCEPTION_SHARE", 0.5)
    rng = np.random.default_rng(20261127)
    seen = {True: 0, False: 0}
    compared = 0
    for trial in range(10):
        n, p = int(rng.integers(80, 300)), int(rng.integers(12, 200))
        codes, is_cat, nbins = sparse_codes(rng, n, p, dense=trial % 2 == 0)
        scratch = T.new_scratch(codes, 15, nbins, model=MODEL_NORMAL_KNOWN_VARIANCE)
        assert scratch.ex_ptr.size == p + 1
        cs = C.new_ctmc_state(n, 15, nbins, is_cat, 1)
        data = Data(codes, is_cat, nbins, np.zeros(n), np.zeros(0, dtype=np.int64))
        for m in (1, 2, 5):
            for _ in range(40):
                size = int(rng.integers(1, min(n, 2 * C.SMALL_SET)))
                if rng.random() < 0.5:  # rows sharing a rare code of one predictor, plus a few others
                    v = int(rng.integers(0, p))
                    off = codes[v] != scratch.ex_mode[v]
                    pool = np.flatnonzero(codes[v] == codes[v, off][0]) if off.any() else off[:0]
                    if pool.size == 0:
                        continue
                    pool = np.union1d(pool, rng.choice(n, int(rng.integers(0, 3)), replace=False))
                    rows = rng.choice(pool, min(size, pool.size), replace=False)
                else:
                    rows = rng.choice(n, size, replace=False)
                rows = np.sort(rows).astype(np.int32)
                perm = np.concatenate([rng.permutation(np.setdiff1d(np.arange(n), rows)), rows]).astype(np.int32)
                start = n - rows.size
                old, new = _availability_both(data, perm, start, n, m, scratch, cs)
                assert old == new, (trial, m, rows.tolist())
                seen[bool(old)] += 1
                compared += 2 * m <= rows.size <= C.SMALL_SET
    assert seen[True] > 100 and seen[False] > 100  # both answers, many times
    assert compared > 300


@njit
def _bins(tree, node, data, v, target, cs, model):
    C._bin_rows(tree, node, data.xt, v, data.nbins[v], data.y, data.ycls, target, cs, model)


@njit
def _bins_prepared(tree, node, data, v, target, scratch, cs):
    C._prepare_leaf(tree, node, data, target, scratch, cs, scratch.model)
    C._bin_leaf_var(tree, node, data, v, target, scratch, cs)
    C._unprepare(cs)


@pytest.mark.parametrize("model", [MODEL_NORMAL_KNOWN_VARIANCE, MODEL_MEAN_SHIFT, MODEL_CLASSIFICATION])
def test_bin_rows_sparse_paths_give_the_counting_sorts_numbers(model, monkeypatch):
    """Every predictor of random sparse data at random leaves (row segments in random order), with
    its most common code as ``cs.bin_mode`` (``_bin_rows_sparse``), from its exceptions at a
    prepared leaf (``_bin_rows_exceptions``; not for classification) and with -1 (the counting
    sort): the same sorted rows, bin counts, response sums (square sums where the leaf model reads
    them) and class counts, bit for bit."""
    monkeypatch.setattr(T, "EXCEPTION_SHARE", 0.5)
    rng = np.random.default_rng(5)
    n, p = 400, 60
    codes, is_cat, nbins = sparse_codes(rng, n, p)
    y = rng.normal(size=n) * rng.choice([1e-3, 1.0, 1e3], n)  # sums that round differently in another order
    ycls = rng.integers(0, 3, n).astype(np.int64)
    data = Data(codes, is_cat, nbins, y, ycls)
    # ``_bin_rows`` reads the target only for basis leaves; the model is the tag
    hyper = make_target(kernel_prior(TreePrior(0.95, 2.0, 1), None, likelihood=True, tau2=0.1,
                                     model_code=MODEL_NORMAL_KNOWN_VARIANCE))
    tag = T.model_tag(model)
    scratch = T.new_scratch(codes, 15, nbins, 3, model=model)
    cs = C.new_ctmc_state(n, 15, nbins, is_cat, 3)
    assert scratch.ex_ptr.size == p + 1
    from_exceptions = 0
    for size in (n, 250, 60, 9):
        tree = T.new_tree(n, 15, 3)
        tree.perm[:] = rng.permutation(n).astype(np.int32)
        start = int(rng.integers(0, n - size + 1))
        tree.start[0], tree.end[0] = start, start + size
        for v in range(p):
            out = []
            for way in ("exceptions", "registers", "counting sort"):
                cs.bin_mode[:] = -1
                cs.bin_mode[v] = -1 if way == "counting sort" else int(scratch.ex_mode[v])
                if way == "exceptions":
                    _bins_prepared(tree, 0, data, v, hyper, scratch, cs)
                    from_exceptions += (model != MODEL_CLASSIFICATION
                                        and scratch.ex_ptr[v + 1] - scratch.ex_ptr[v] <= size)
                else:
                    _bins(tree, 0, data, v, hyper, cs, tag)
                assert not cs.off_code.any() and cs.prepared[0] == -1
                nb = nbins[v]
                out.append((cs.sorted_rows[:size].copy(), cs.bin_n[:nb + 1].copy(), cs.bin_s1[:nb].copy(),
                            cs.bin_s2[:nb].copy(), cs.bin_cls[:nb].copy()))
            for way in (0, 1):
                for k, (a, b) in enumerate(zip(out[way], out[2])):
                    if k == 3 and model != MODEL_MEAN_SHIFT:
                        continue  # the square sums: read by the mean-shift model only (of these three)
                    np.testing.assert_array_equal(a, b, err_msg=f"size {size}, predictor {v}, field {k}, way {way}")
    if model != MODEL_CLASSIFICATION:
        assert from_exceptions > 100  # most (leaf, predictor) pairs went through the exceptions


def _wide_sparse_frame(seed: int, n: int = 160, p: int = 30) -> pd.DataFrame:
    """Mostly rare 0/1 indicators (as grants' are), a dense numeric and a factor with one common level."""
    rng = np.random.default_rng(seed)
    cols = {}
    for v in range(p):
        cols[f"b{v}"] = (rng.random(n) < (0.02, 0.05, 0.15)[v % 3]).astype(float)
    cols["x"] = rng.normal(size=n)
    cols["f"] = pd.Categorical(np.where(rng.random(n) < 0.7, "a", rng.choice(["b", "c", "d"], n)))
    df = pd.DataFrame(cols)
    df["y"] = df["b2"] + df["b5"] + (df["x"] > 0) + 2.0 * df["f"].isin(["b", "c"]) + 0.3 * rng.normal(size=n)
    return df


def _all_draws(fit) -> dict:
    """Every data variable of every group of the fit (as ``draw_fingerprints._hash_fit`` hashes)."""
    return {f"{node.path}/{name}": np.asarray(node.ds[name].values)
            for node in fit.idata.subtree for name in node.ds.data_vars}


@pytest.mark.parametrize("model, options", [
    ("bart", {}),
    ("bart", {"rotate": True, "perturb": True, "change_of_variable": 0.5}),
    ("cart", {}),  # the common-sigma model: refresh_global_rates
    ("classify", {}),
])
def test_ctmc_draws_the_same_on_the_sparse_and_the_dense_paths(model, options, monkeypatch):
    """The same ``ctmc`` fit on sparse data with the exceptions kept (the sparse paths of
    ``_bin_rows`` and ``_rows_available``) and with none kept (the counting sort and
    ``has_available_rule`` everywhere): every draw and statistic equal."""
    df = _wide_sparse_frame(3)
    if model == "classify":
        df["y"] = pd.Categorical(np.where(df["y"] > df["y"].median(), "hi", "lo"))
        model = "cart"
    run = dict(trees=8, draws=12, tune=8) if model == "bart" else dict(draws=60)
    chains = []
    make_chain = SamplerSpec.make_chain

    def kept(self, *a, **k):
        chains.append(make_chain(self, *a, **k))
        return chains[-1]

    monkeypatch.setattr(SamplerSpec, "make_chain", kept)
    draws = []
    for share in (0.5, -1.0):  # -1: no share is small enough, nothing kept
        monkeypatch.setattr(T, "EXCEPTION_SHARE", share)
        fit = getattr(bps, model)("y ~ .", data=df, sampler="ctmc", sampler_options=options, chains=1, seed=9,
                                  progress=False, check_mixing=False, min_leaf_size=1, **run)
        draws.append(_all_draws(fit))
        # the sparse binning ran for the indicators in the first fit only
        assert (chains[-1].cs.bin_mode >= 0).sum() == (30 if share > 0 else 0)
    assert draws[0].keys() == draws[1].keys()
    for key in draws[0]:
        np.testing.assert_array_equal(draws[0][key], draws[1][key], err_msg=key)
