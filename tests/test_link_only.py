"""Link-only libraries (``_kernels/link_only.py``): helpers are kept as IR for their callers, with
no machine code of their own, and everything a kernel does still works, compiled fresh and
loaded from numba's cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import bartpy_suite
from bartpy_suite._kernels import link_only

MODULE = '''
import numpy as np
from bartpy_suite._kernels.jit import helper, kernel


@helper(refcounts=True)  # allocates an array
def inner(n):
    if n > 100:
        raise ValueError("too big", n)  # arguments boxed at run time: needs the environment
    return np.empty(n)


@helper(refcounts=True)  # calls a function returning an array
def middle(n):
    return inner(n - 1).shape[0]


@kernel
def first(n):
    return middle(n)


@kernel
def second(n):  # a second kernel linking the same helpers
    return middle(n + 1) * 2


@helper
def scaled(x, k):
    return x * k


@kernel
def third(a):  # a: int32 array; scaled is called with literals, int32 and int64 arguments
    return scaled(a[0], 2) + scaled(a[1], a[2]) + scaled(np.int64(5), a[0])
'''

CHILD = '''
import json
import numpy as np
import linkmod
from bartpy_suite._kernels.link_only import available, is_link_only

out = {"available": available(), "values": [linkmod.first(5), linkmod.second(5)], "errors": [],
       "third": int(linkmod.third(np.array([3, 4, 5], dtype=np.int32)))}
out["scaled_signatures"] = [str(sig) for sig in linkmod.scaled.signatures]
for fn in (linkmod.first, linkmod.second, linkmod.middle):  # middle: its Python twin
    for n in (-3, 500):
        try:
            fn(n)
            out["errors"].append(None)
        except Exception as exc:
            out["errors"].append(f"{type(exc).__name__}: {exc}")
out["link_only"] = {d.py_func.__name__: [is_link_only(c.library) for c in d.overloads.values()]
                    for d in (linkmod.inner, linkmod.first, linkmod.second)}
print("RESULT " + json.dumps(out))
'''


def test_overrides_are_installed():
    """numba's internals are what the overrides expect; otherwise every function would silently be
    compiled the usual way again and the first fit would take half as long again to compile."""
    assert link_only.available()


def _run(tmp_path: Path, cache: Path) -> dict:
    package_root = Path(bartpy_suite.__file__).resolve().parents[1]  # the package under test
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache),
               PYTHONPATH=os.pathsep.join([str(tmp_path), str(package_root), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    line = next(s for s in proc.stdout.splitlines() if s.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


@pytest.mark.skipif(not link_only.available(), reason="numba's internals differ; nothing is patched")
def test_kernels_linking_link_only_helpers_run_fresh_and_cached(tmp_path):
    (tmp_path / "linkmod.py").write_text(textwrap.dedent(MODULE))
    cache = tmp_path / "numba_cache"
    fresh = _run(tmp_path, cache)
    cached = _run(tmp_path, cache)
    expected_errors = ["ValueError: negative dimensions not allowed", "ValueError: ('too big', 499)",
                       "ValueError: negative dimensions not allowed", "ValueError: ('too big', 500)",
                       "ValueError: negative dimensions not allowed", "ValueError: ('too big', 499)"]
    for run in (fresh, cached):
        assert run["available"]
        assert run["values"] == [4, 10]
        assert run["third"] == 3 * 2 + 4 * 5 + 5 * 3
        assert run["errors"] == expected_errors
    # Fresh: the helper was compiled link-only, the kernels with machine code. Cached: the kernels
    # load with their linked code and the helper loads as IR only (through middle's Python twin).
    assert fresh["link_only"] == {"inner": [True], "first": [False], "second": [False]}
    assert cached["link_only"] == {"inner": [True], "first": [False], "second": [False]}
    assert any(cache.rglob("linkmod.inner-*.nbc")), "the helper's IR is cached"
    # One signature per argument kind (jit.KernelDispatcher.get_call_template): the literal 2, the
    # int32 elements and the int64 all call the one int64 compilation of ``scaled``.
    assert fresh["scaled_signatures"] == ["(int64, int64)"]
