"""Typed records of the soft-tree kernels (``soft_tree.py``, ``nuts.py``, ``rjhmc.py`` and the soft
functions of ``shap.py``; issue 29, "Kernel interface").

What travels together travels as one ``typing.NamedTuple``, so that a kernel takes a handful of
named records instead of a dozen arrays of the same type that a caller could swap unnoticed:

* settings, immutable and typed (floats as float, counts as int, flags as bool), built once per
  chain by ``samplers.hmc.soft_settings``: ``SoftConf`` (the density), ``RJSettings`` (the
  reversible-jump moves), ``NutsSettings`` (NUTS's adaptation and one run's warm-up plan), bundled
  as ``SoftSettings``;
* the data: ``SoftData`` (scaled predictors, response, class codes);
* the tree: ``SoftState`` (one soft tree and its parameters), ``RJStates`` (the four states of an
  RJ iteration and its statistics), ``SoftTrees`` (the stored draws' trees, for prediction and SHAP);
* what the kernels write: ``SoftWork`` (the density's scratch, and the routing bandwidth in effect,
  which NUTS anneals during warm-up), ``NutsScratch``, ``RJScratch``;
* ``SoftTarget``: what NUTS evaluates (a soft tree on the data, or a Gaussian for the tests).

numba types a named tuple by its fields' types, so every record built here with the same dtypes
compiles once. Import rule: numpy only.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

MODE_DF = 0  # one split predictor per node (hmc_df)
MODE_DFI = 1  # a split direction on the simplex (hmc_dfi)

KIND_SOFT_TREE = 0  # NUTS target: the soft tree's potential
KIND_GAUSSIAN = 1  # NUTS target: a Gaussian with precision ``data.X`` and mean ``data.y`` (tests of NUTS)


class SoftConf(NamedTuple):
    """Settings of the soft tree's density (never written by a kernel)."""

    mode: int  # MODE_DF or MODE_DFI
    nx: int  # predictors
    n_classes: int  # 0 for regression
    lik: bool  # False: prior only
    mu_mean: float  # leaf mean ~ N(mu_mean, mu_scale^2)
    mu_scale: float
    sig_a: float  # sigma ~ InverseGamma(a, b) on sigma (not sigma^2), spec 1.2
    sig_b: float
    class_alpha: float  # symmetric Dirichlet alpha of the class likelihood (eq. 10)
    class_const: bool  # include lnGamma(A) - sum lnGamma(alpha) per leaf (eq. 10); False: the code's version
    kind: int  # KIND_SOFT_TREE or KIND_GAUSSIAN


class RJSettings(NamedTuple):
    """Settings of the reversible-jump moves (paper Alg. 1, spec 2)."""

    p_grow_warm: float  # move probabilities during tune
    p_prune_warm: float
    p_grow: float  # and after it
    p_prune: float
    alpha_s: float  # p_split(d) = alpha_s (1 + d)^-beta_s (eqs. 14-15)
    beta_s: float
    carry: bool  # carry step size and inverse metric across iterations (cheap mode); False: restart
    code_quirks: bool  # the authors' code's prune warm start, prune rv and stump reverse probability
    keep_first: bool  # on rejection keep x' (the first NUTS run's state); False: return to x as the code does


class NutsSettings(NamedTuple):
    """NUTS's adaptation (Stan's defaults) and the plan of one run: ``warmup`` adaptive transitions
    with h annealed from ``h_init`` to ``h_final``, then ``n_after`` kept transitions."""

    target_accept: float  # dual-averaging delta
    gamma: float
    t0: float
    kappa: float
    max_depth: int
    warmup: int
    n_after: int
    h_init: float
    h_final: float
    code_schedule: bool  # the code's h schedule (spec 3); False: the recommended one


class SoftSettings(NamedTuple):
    """All settings of a soft-tree chain (``samplers.hmc.soft_settings``)."""

    conf: SoftConf
    rj: RJSettings
    nuts: NutsSettings


class SoftData(NamedTuple):
    """The training data: min-max scaled predictors ``X`` (n, nx) float64, the standardised response
    ``y`` (n,) float64 and the class codes ``ycls`` (n,) int64. A Gaussian target (``KIND_GAUSSIAN``)
    holds its precision in ``X`` and its mean in ``y``."""

    X: np.ndarray
    y: np.ndarray
    ycls: np.ndarray


class SoftWork(NamedTuple):
    """Scratch arrays of the density of one soft tree with at most ``cap`` nodes, and the routing
    bandwidth in effect (``h[0]``: written by NUTS's annealing and by ``rjhmc.state_energy``)."""

    P: np.ndarray  # (n, cap) probability of reaching each node
    SP: np.ndarray  # (n, cap) expit(a) at internal nodes
    SM: np.ndarray  # (n, cap) expit(-a)
    B: np.ndarray  # (cap,) backward adjoints of one row
    tau: np.ndarray  # (cap,)
    delta: np.ndarray  # (cap, nx)
    gtau: np.ndarray  # (cap,) d log lik / d tau
    gdelta: np.ndarray  # (cap, nx)
    mu: np.ndarray  # (cap,)
    counts: np.ndarray  # (cap, n_classes) soft class counts
    parts: np.ndarray  # (3,) log lik, log prior, log |J| of the last evaluation
    gleaf: np.ndarray  # (cap, n_classes) d log lik / d phi of a row of each class at each leaf
    stick: np.ndarray  # (2, nx) forward quantities of ``stick_backward``
    h: np.ndarray  # (1,) routing bandwidth


def new_work(n: int, cap: int, nx: int, n_classes: int, h: float) -> SoftWork:
    """Scratch for ``n`` rows, ``cap`` nodes, ``nx`` predictors, ``n_classes`` classes (0: regression)
    and routing bandwidth ``h``."""
    k = max(n_classes, 1)
    return SoftWork(np.zeros((n, cap)), np.zeros((n, cap)), np.zeros((n, cap)), np.zeros(cap), np.zeros(cap),
                    np.zeros((cap, nx)), np.zeros(cap), np.zeros((cap, nx)), np.zeros(cap), np.zeros((cap, k)),
                    np.zeros(3), np.zeros((cap, k)), np.zeros((2, max(nx, 1))), np.array([float(h)]))


class SoftTarget(NamedTuple):
    """What NUTS evaluates: the soft tree of topology ``right``/``kappa`` (``nn[0]`` nodes, parameter
    offsets ``off``) on ``data``, or a Gaussian when ``conf.kind == KIND_GAUSSIAN``."""

    data: SoftData
    right: np.ndarray  # int64 (cap,) right child, -1 at leaves
    kappa: np.ndarray  # int64 (cap,) split variable (DF)
    nn: np.ndarray  # int64 (1,) node count
    off: np.ndarray  # int64 (cap,) first coordinate of each node in q
    conf: SoftConf
    work: SoftWork


class SoftState(NamedTuple):
    """One soft tree with its constrained parameters (capacity ``cap`` nodes)."""

    right: np.ndarray  # int64 (cap,) right child, -1 at leaves
    kappa: np.ndarray  # int64 (cap,) split variable (DF)
    depth: np.ndarray  # int64 (cap,)
    tau: np.ndarray  # (cap,)
    delta: np.ndarray  # (cap, nx)
    mu: np.ndarray  # (cap,)
    minv: np.ndarray  # (cap, nx) carried inverse metric per node coordinate
    scal: np.ndarray  # (4,) sigma, its inverse metric, step size, spare
    nn: np.ndarray  # int64 (1,) node count


def new_state(cap: int, nx: int) -> SoftState:
    """A stump with tau = 1/2, uniform direction, mu = 0, sigma = 1."""
    return SoftState(np.full(cap, -1, dtype=np.int64), np.zeros(cap, dtype=np.int64), np.zeros(cap, dtype=np.int64),
                     np.full(cap, 0.5), np.full((cap, nx), 1.0 / nx), np.zeros(cap), np.ones((cap, nx)),
                     np.array([1.0, 1.0, 1.0, 0.0]), np.ones(1, dtype=np.int64))


class RJStates(NamedTuple):
    """The states of one RJ iteration: the chain's ``cur`` = (T, x), and the scratch states ``x1``
    (x'), ``prop`` ((T*, x'')) and ``xs`` (the x values before the code's prune rv); ``it``
    (``rjhmc.N_IT``,) receives the iteration's statistics."""

    cur: SoftState
    x1: SoftState
    prop: SoftState
    xs: SoftState
    it: np.ndarray


class NutsScratch(NamedTuple):
    """Scratch of a NUTS run (``nuts.new_scratch``). The kernels allocate nothing below
    ``rjhmc.iteration``: a compiled function that allocates counts references, and reference
    counting the arrays of these records was most of the kernel's code (``rjhmc.iteration``)."""

    scr: np.ndarray  # (max_depth + 1, 8, dim) per-depth vectors of ``_build_tree``
    scs: np.ndarray  # (max_depth + 1, 5) per-depth scalars
    tmp: np.ndarray  # (16, dim) the trajectory's end states and momenta
    acc: np.ndarray  # (4,) a transition's accumulators (``nuts._build_tree``)
    ends: np.ndarray  # int64 (64,) last transition of each slow window (``nuts.window_plan``)
    welford: np.ndarray  # (2, dim) running mean and sum of squares of a metric window
    order: np.ndarray  # int64 (2 dim + 1,) visiting order of the split variables (``nuts._gibbs_kappa``)


class RJScratch(NamedTuple):
    """Scratch of an RJ iteration for trees of at most ``cap`` nodes (``rjhmc.new_scratch``)."""

    off: np.ndarray  # int64 (cap,) parameter offsets
    bufs: np.ndarray  # (6, dim) q, gradient, inverse metric of a NUTS run; q and gradient of energies
    work: SoftWork
    nuts: NutsScratch
    rs: np.ndarray  # (nuts.N_RUN_STATS,) statistics of the iteration's NUTS runs
    u: np.ndarray  # (1,) U at the NUTS run's point
    kept: np.ndarray  # (n_after, dim) the NUTS run's kept transitions
    index: np.ndarray  # int64 (2, cap) internal nodes and leaves in preorder (``rjhmc._positional_copy``)


class SoftTrees(NamedTuple):
    """The stored draws' soft trees, concatenated in preorder (one tree per draw), and their routing."""

    var: np.ndarray  # int32 (nodes,) split predictor, -1 at leaves (DFI: the direction's largest weight)
    right: np.ndarray  # int64 (nodes,) flat right child
    roots: np.ndarray  # int64 (samples,) flat root of each draw's tree
    counts: np.ndarray  # int64 (samples,) its node count
    tau: np.ndarray  # (nodes,) thresholds
    delta: np.ndarray  # (nodes, nx) split directions
    h: float  # routing bandwidth
    mode: int  # MODE_DF or MODE_DFI
