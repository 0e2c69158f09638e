"""numba as numba ships it (issue 29): this package's overrides of numba's classes
(``_kernels/link_only.py``, ``_kernels/config_hash.py``) are in place only while one of its own
dispatchers compiles or loads a kernel, and another thread's numba compile sees numba unchanged.

The process-level checks run in fresh interpreters, because the test process has long imported
the package: each child takes a snapshot of numba's attributes before importing it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from numba.core.codegen import CPUCodeLibrary
from numba.core.cpu import CPUContext
from numba.core.targetconfig import TargetConfig

import bartpy_suite
from bartpy_suite._kernels import link_only

PACKAGE_ROOT = Path(bartpy_suite.__file__).resolve().parents[1]

# A helper and a kernel of the package's kind, in a module of their own (written to tmp_path).
TOYMOD = '''
import numpy as np
from bartpy_suite._kernels.jit import helper, kernel


@helper(refcounts=True)
def filled(n):
    out = np.empty(n)
    for i in range(n):
        out[i] = i * 0.5
    return out


@kernel
def total(n):
    return filled(n).sum()
'''

# Run first in every child: numba's attributes as numba made them, before the package is imported.
SNAPSHOT = '''
import json
from numba import _dynfunc
from numba.core.codegen import CPUCodeLibrary
from numba.core.compiler import CompileResult
from numba.core.cpu import CPUContext
from numba.core.targetconfig import TargetConfig

WATCHED = [(TargetConfig, "__hash__"), (TargetConfig, "__eq__"),
           (CPUCodeLibrary, "_finalize_final_module"), (CPUCodeLibrary, "_optimize_final_module"),
           (CPUCodeLibrary, "serialize_using_object_code"), (CPUCodeLibrary, "_unserialize"),
           (CPUCodeLibrary, "_finalize_dynamic_globals"), (CPUCodeLibrary, "_get_module_for_linking"),
           (CPUContext, "get_executable"), (CompileResult, "_find_referenced_environments")]
BEFORE = {f"{owner.__name__}.{name}": vars(owner).get(name) for owner, name in WATCHED}
MAKE_FUNCTION = _dynfunc.make_function


def changed():
    """Names of the watched attributes that are not numba's originals now (identity)."""
    now = {f"{owner.__name__}.{name}": vars(owner).get(name) for owner, name in WATCHED}
    out = [name for name in BEFORE if now[name] is not BEFORE[name]]
    if _dynfunc.make_function is not MAKE_FUNCTION:
        out.append("_dynfunc.make_function")
    return out
'''


def _run(tmp_path: Path, body: str, cache: Path | None = None, timeout: float = 600) -> dict:
    (tmp_path / "toymod.py").write_text(textwrap.dedent(TOYMOD))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(PACKAGE_ROOT),
                                                       os.environ.get("PYTHONPATH", "")]))
    if cache is not None:
        env["NUMBA_CACHE_DIR"] = str(cache)
    script = SNAPSHOT + textwrap.dedent(body)
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                          timeout=timeout, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(s for s in proc.stdout.splitlines() if s.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def test_numba_is_tested_reads_the_version():
    low, high = link_only.TESTED_NUMBA
    assert link_only.numba_is_tested(f"{low[0]}.{low[1]}.0")
    assert link_only.numba_is_tested(f"{high[0]}.{high[1]}.9rc1")
    assert not link_only.numba_is_tested(f"{low[0]}.{low[1] - 1}.2")
    assert not link_only.numba_is_tested(f"{high[0]}.{high[1] + 1}.0")
    assert not link_only.numba_is_tested("1.0.0")
    assert not link_only.numba_is_tested("unknown")


@pytest.mark.skipif(not link_only.available(), reason="numba's internals differ; nothing is patched")
def test_in_place_inside_compiling_only_nested_and_after_an_error():
    original = CPUContext.__dict__["get_executable"]
    assert original.__module__ == "numba.core.cpu"
    assert "_unserialize" in CPUCodeLibrary.__dict__
    with pytest.raises(RuntimeError, match="compile failed"):
        with link_only.compiling():
            assert CPUContext.__dict__["get_executable"] is not original
            assert link_only.in_scope()
            with link_only.compiling():  # nested: still in place after the inner block
                pass
            assert CPUContext.__dict__["get_executable"] is not original
            assert TargetConfig.__dict__["__hash__"].__module__ == "bartpy_suite._kernels.config_hash"
            raise RuntimeError("compile failed")
    assert CPUContext.__dict__["get_executable"] is original
    assert TargetConfig.__dict__["__hash__"].__module__ == "numba.core.targetconfig"
    assert not link_only.in_scope()
    assert all(name.startswith("numba.core.") for name in link_only.patched_names())


@pytest.mark.skipif(not link_only.available(), reason="numba's internals differ; nothing is patched")
def test_numba_is_numbas_after_a_fit_and_patched_inside_package_compiles(tmp_path):
    """A fit (its kernels compiled or loaded from the package's cache, which loads through the
    overridden ``_unserialize``) and a toy kernel compiled fresh: afterwards numba's attributes are
    its originals; during each of the package's compilations they were replaced."""
    run = _run(tmp_path, '''
        from numba.core import event
        seen = []

        class Compiles(event.Listener):
            def on_start(self, ev):
                fn = ev.data["dispatcher"].py_func
                seen.append([fn.__module__, sorted(changed())])

            def on_end(self, ev):
                pass

        event.register("numba:compile", Compiles())
        import numpy as np
        import pandas as pd
        import bartpy_suite as bps
        from bartpy_suite._kernels.link_only import is_link_only, patched_names
        out = {"after_import": changed()}
        rng = np.random.default_rng(0)
        data = pd.DataFrame({"x": rng.uniform(size=60)})
        data["y"] = (data["x"] > 0.5) + 0.1 * rng.standard_normal(60)
        fit = bps.cart("y ~ x", data=data, chains=1, draws=5, tune=5, seed=0, progress=False)
        fit.predict(data.head(3))
        out["after_fit"] = changed()
        import toymod
        out["total"] = toymod.total(5)
        out["after_toy"] = changed()
        out["toy_compiles"] = [s for s in seen if s[0] == "toymod"]
        out["helper_link_only"] = [is_link_only(c.library) for c in toymod.filled.overloads.values()]
        out["patched"] = sorted(name.rsplit(".", 2)[-2] + "." + name.rsplit(".", 1)[-1] for name in patched_names())
        print("RESULT " + json.dumps(out))
    ''')  # the package's kernels: its usual cache (loaded if filled); toymod's: a fresh tmp_path/__pycache__
    assert run["after_import"] == [] and run["after_fit"] == [] and run["after_toy"] == []
    assert run["total"] == 0.5 * (0 + 1 + 2 + 3 + 4)
    # both toy functions compiled (an empty cache), each with every override in place
    assert run["patched"] == sorted(["TargetConfig.__hash__", "TargetConfig.__eq__",
                                     "CPUCodeLibrary._finalize_final_module", "CPUCodeLibrary._optimize_final_module",
                                     "CPUCodeLibrary.serialize_using_object_code", "CPUCodeLibrary._unserialize",
                                     "CPUContext.get_executable", "CompileResult._find_referenced_environments"])
    assert len(run["toy_compiles"]) == 2
    for _, replaced in run["toy_compiles"]:
        assert replaced == run["patched"]
    assert run["helper_link_only"] == [True]


@pytest.mark.skipif(not link_only.available(), reason="numba's internals differ; nothing is patched")
def test_a_users_njit_in_another_thread_sees_numba_unchanged(tmp_path):
    """Thread A compiles a package kernel; thread B starts compiling a user's ``@numba.njit``
    function while A is inside its compile. B waits for numba's compiler lock, then compiles with
    numba's own classes: its library is an ordinary one with machine code, and it runs."""
    run = _run(tmp_path, '''
        import threading
        import numpy as np
        import numba
        from numba.core import event
        import toymod
        from bartpy_suite._kernels.link_only import is_link_only

        a_inside = threading.Event()
        log = []

        class Compiles(event.Listener):
            def on_start(self, ev):
                fn = ev.data["dispatcher"].py_func
                log.append(("start", fn.__name__, threading.current_thread().name, sorted(changed())))
                if fn.__name__ == "total":
                    a_inside.set()

            def on_end(self, ev):
                fn = ev.data["dispatcher"].py_func
                log.append(("end", fn.__name__, threading.current_thread().name, sorted(changed())))

        event.register("numba:compile", Compiles())

        @numba.njit
        def users(n):
            a = np.empty(n)
            for i in range(n):
                a[i] = i
            return a.sum()

        results = {}
        a = threading.Thread(target=lambda: results.update(a=toymod.total(5)), name="A")
        b = threading.Thread(target=lambda: results.update(b=users(4)), name="B")
        a.start()
        a_inside.wait(120)
        b.start()
        a.join(300)
        b.join(300)
        out = {"results": results, "log": log, "after": changed(),
               "users_link_only": [is_link_only(c.library) for c in users.overloads.values()],
               "users_has_code": [c.library.get_pointer_to_function(c.fndesc.llvm_cpython_wrapper_name) != 0
                                  for c in users.overloads.values()]}
        print("RESULT " + json.dumps(out))
    ''', cache=tmp_path / "thread_cache")
    assert run["results"] == {"a": 5.0, "b": 6.0}
    assert run["after"] == []
    assert run["users_link_only"] == [False] and run["users_has_code"] == [True]
    log = run["log"]
    user_start = next(i for i, e in enumerate(log) if e[:2] == ["start", "users"])
    assert log[user_start][2] == "B" and log[user_start][3] == [], "the user's compile saw numba patched"
    toy_start = next(i for i, e in enumerate(log) if e[:2] == ["start", "total"])
    assert log[toy_start][2] == "A" and log[toy_start][3] != []
    # numba's compiler lock: B's compile ran after A's had finished, not interleaved with it
    toy_end = max(i for i, e in enumerate(log) if e[:2] == ["end", "total"])
    assert toy_start < toy_end < user_start
    # every compile event of the user's function and of numba's overloads it needed, on thread B,
    # saw numba as shipped
    assert all(e[3] == [] for e in log if e[2] == "B")


def test_unknown_numba_compiles_plainly(tmp_path):
    """A numba version outside ``TESTED_NUMBA``: nothing is ever patched, helpers compile the usual
    way (with machine code of their own) and kernels calling them work."""
    run = _run(tmp_path, '''
        import numba
        numba.__version__ = "0.99.0"  # before the package is imported: an untested numba
        from numba.core import event
        seen = []

        class Compiles(event.Listener):
            def on_start(self, ev):
                seen.append(changed())

            def on_end(self, ev):
                pass

        event.register("numba:compile", Compiles())
        import toymod
        from bartpy_suite._kernels.link_only import available, is_link_only
        out = {"available": available(), "total": toymod.total(5), "seen": seen, "after": changed(),
               "helper_link_only": [is_link_only(c.library) for c in toymod.filled.overloads.values()]}
        print("RESULT " + json.dumps(out))
    ''', cache=tmp_path / "plain_cache")
    assert run["available"] is False
    assert run["total"] == 5.0
    assert run["seen"] and all(s == [] for s in run["seen"])
    assert run["after"] == []
    assert run["helper_link_only"] == [False]


def _numbas_own(saved: dict) -> list[str]:
    """Names of the overridden attributes that are not what numba had before (identity)."""
    return [f"{owner.__name__}.{name}" for (owner, name), value in saved.items()
            if owner.__dict__.get(name, link_only._MISSING) is not value]


def _lock_is_free() -> bool:
    """Whether another thread can take numba's compiler lock (within 5 s)."""
    from numba.core.compiler_lock import global_compiler_lock

    taken = threading.Event()

    def take():
        with global_compiler_lock:
            taken.set()

    worker = threading.Thread(target=take, daemon=True)
    worker.start()
    return taken.wait(5.0)


@pytest.mark.skipif(not link_only.available(), reason="numba's internals differ; nothing is patched")
@pytest.mark.parametrize("where", ["after the overrides went in", "halfway through them"])
def test_an_interrupt_while_compiling_starts_leaves_numba_as_it_was_and_the_lock_free(monkeypatch, where):
    """A KeyboardInterrupt landing right after ``compiling`` put the overrides in place (before its
    bookkeeping) or between two of them: numba's own methods are back, ``in_scope`` is False and
    the compiler lock is free. Before the fix the first case left every override in place for
    good (the depth counter was never raised, so no later block put them back)."""
    saved = {(owner, name): owner.__dict__.get(name, link_only._MISSING) for owner, name, _ in link_only._OVERRIDES}
    if where == "after the overrides went in":
        real = link_only._put_in_place

        def interrupted():
            real()
            raise KeyboardInterrupt

        monkeypatch.setattr(link_only, "_put_in_place", interrupted)
    else:
        class Refuses(type):
            def __setattr__(cls, name, value):
                raise KeyboardInterrupt

        boom = Refuses("Boom", (), {})
        half = len(link_only._OVERRIDES) // 2
        monkeypatch.setattr(link_only, "_OVERRIDES", [*link_only._OVERRIDES[:half], (boom, "attr", None),
                                                      *link_only._OVERRIDES[half:]])
    with pytest.raises(KeyboardInterrupt):
        with link_only.compiling():
            pass
    monkeypatch.undo()
    assert _numbas_own(saved) == []
    assert not link_only.in_scope()
    assert _lock_is_free()
    with link_only.compiling():  # and the next block works as usual
        assert CPUContext.__dict__["get_executable"] is not saved[(CPUContext, "get_executable")]
    assert _numbas_own(saved) == []
