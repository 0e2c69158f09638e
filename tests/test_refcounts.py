"""Helpers compiled without reference counting (``jit.helper(refcounts=False)``, the default) keep
every count balanced: compiling one that could unbalance a count fails with a message saying what
to do, and fitting any model with any sampler frees every array numba allocated or adopted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from kernel_conventions import nrt_balance

import bartpy_suite as bps

MODULE = '''
import numpy as np
from bartpy_suite._kernels.jit import helper, kernel


@helper(refcounts=True)
def halves(a):  # a tuple of two new views: each holds a reference
    n = a.shape[0] // 2
    return a[:n], a[n:]


@helper
def weighted(a, w):  # borrows both arrays
    total = 0.0
    for i in range(a.shape[0]):
        total += a[i] * w[i]
    return total


@helper(refcounts=True)
def split_sum(a, w):
    left, right = halves(a)
    wl, wr = halves(w)
    return weighted(left, wl) - weighted(right, wr)


@kernel
def good(a, w):
    return split_sum(a, w)


@helper
def borrowed_call(a):  # would never release the views halves returns
    left, right = halves(a)
    return left[0] + right[0]


@kernel
def calls_bad(a):
    return borrowed_call(a)


@helper
def borrowed_return(a):  # would hand out views nobody counted
    return a[:1], a[1:]


@kernel
def returns_bad(a):
    left, right = borrowed_return(a)
    return left[0] + right[0]
'''

CHILD = '''
import gc, json
import numpy as np
import refmod
from numba.core.runtime import rtsys

out = {}
a = np.arange(6.0)
w = np.ones(6)
out["good"] = refmod.good(a, w)
del a, w
gc.collect()
stats = rtsys.get_allocation_stats()
out["balance"] = [stats.mi_alloc - stats.mi_free, stats.alloc - stats.free]
for name in ("calls_bad", "returns_bad"):
    try:
        getattr(refmod, name)(np.arange(4.0))
        out[name] = None
    except Exception as exc:
        out[name] = str(exc)
print("RESULT " + json.dumps(out))
'''


def test_helpers_that_could_unbalance_a_count_do_not_compile(tmp_path: Path):
    (tmp_path / "refmod.py").write_text(textwrap.dedent(MODULE))
    package_root = Path(bps.__file__).resolve().parents[1]
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba_cache"), NUMBA_NRT_STATS="1",
               PYTHONPATH=os.pathsep.join([str(tmp_path), str(package_root), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(next(s for s in proc.stdout.splitlines() if s.startswith("RESULT "))[len("RESULT "):])
    assert out["good"] == (0.0 + 1.0 + 2.0) - (3.0 + 4.0 + 5.0)
    # the two input arrays and the four views: every meminfo adopted or made was released
    assert out["balance"] == [0, 0]
    assert out["calls_bad"] is not None and "borrowed_call" in out["calls_bad"]
    assert "calls halves" in out["calls_bad"] and "refcounts=True" in out["calls_bad"]
    assert out["returns_bad"] is not None and "borrowed_return" in out["returns_bad"]
    assert "refcounts=True" in out["returns_bad"]


def _data() -> pd.DataFrame:
    rng = np.random.default_rng(3)
    n = 80
    x = rng.uniform(size=(n, 3))
    df = pd.DataFrame(x, columns=list("abc"))
    df["f"] = pd.Categorical(np.array(list("pqr"))[rng.integers(0, 3, n)])
    df["y"] = 2 * x[:, 0] + rng.standard_normal(n)
    df["yc"] = pd.Categorical(np.array(list("uvw"))[(x[:, 1] * 3).astype(int)])
    return df


RUN = dict(chains=2, draws=5, tune=3, seed=1, progress=False)
FITS = {
    "cart cgm with rotate": lambda df: bps.cart("y ~ a + b + f", data=df, sampler="cgm", sampler_options={
        "moves": {"grow": .3, "prune": .3, "change": .2, "swap": .1, "rotate": .1}}, **RUN),
    "cart pg": lambda df: bps.cart("y ~ a + b + f", data=df, sampler="pg", **RUN),
    "cart tempered": lambda df: bps.cart("y ~ a + b + f", data=df, sampler="tempered", **RUN),
    "cart ctmc": lambda df: bps.cart("yc ~ a + b + f", data=df, sampler="ctmc", **RUN),
    "bart grow_prune": lambda df: bps.bart("y ~ a + b + c + f", data=df, trees=4, threads=1, **RUN),
    "bart pg": lambda df: bps.bart("y ~ a + b + c + f", data=df, trees=4, sampler="pg", threads=1, **RUN),
    "bart ctmc": lambda df: bps.bart("y ~ a + b + c + f", data=df, trees=4, sampler="ctmc", threads=1, **RUN),
    "bart tempered": lambda df: bps.bart("y ~ a + b + c + f", data=df, trees=4, sampler="tempered", threads=1, **RUN),
    "multinomial bart": lambda df: bps.bart("yc ~ a + b + c", data=df, trees=3, threads=1, **RUN),
    "soft tree": lambda df: bps.soft_tree("y ~ a + b + c", data=df, sampler="hmc_dfi", **RUN),
}


@pytest.mark.parametrize("name", list(FITS))
def test_a_fit_releases_every_array_numba_holds(name):
    """numba counts every meminfo it makes or adopts from a numpy array. A borrowed array kept by a
    new reference that is never released (or released twice) leaves the counts unequal once the
    fit and its predictions are gone."""
    df = _data()
    FITS[name](df).predict(df.head(5))  # compile outside the counted window

    def fit_and_predict():
        pred = FITS[name](df).predict(df.head(5))
        assert np.asarray(pred).shape[0] == 5

    made, released = nrt_balance(fit_and_predict)
    assert made > 0  # the fit ran compiled code on arrays
    assert made == released
