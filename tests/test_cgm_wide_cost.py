"""``tree.prior_rule_counts``, the per-node rule counts of the tree prior built from each predictor's
exceptions (``tree.mode_exceptions``), against the fused histogram of ``tree.node_rule_counts``
that it stands in for, and a cgm BART chain run on both paths.

The counts are integers (stored as floats), so the two paths must agree exactly: every check
here is an equality, not a tolerance. The cost the path removes is measured in
``benchmarks/cgm_wide_cost.py`` (``benchmarks/results/cgm_wide_cost.md``); no test times anything.
"""

from __future__ import annotations

import numpy as np
import pytest
from _chains import bart_chain, run_padded
from numba import njit

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
