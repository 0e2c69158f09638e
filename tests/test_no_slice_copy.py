"""No compiled function of the package assigns an array to an array slice (``a[d] = b``).

numba compiles such an assignment with a shape-mismatch error whose message formats both shapes:
string machinery that cost 1.4-3 CPU s of the first compile of a sampler using it (issue 11,
section 1; ``benchmarks/results/compile_time.md``). ``tree.copy_into`` does the same copy without
it. The check runs numba's untyped passes and type inference (no lowering, so it is cheap) on
every signature the package's dispatchers were compiled for or loaded from the cache with, after
a fit with every sampler and model, and looks at the types of every item assignment.
"""

from __future__ import annotations

import importlib
import pkgutil

import numpy as np
import pandas as pd
import pytest
from numba.core import compiler, ir, types
from numba.core.compiler_machinery import AnalysisPass, register_pass
from numba.core.registry import cpu_target
from numba.core.typed_passes import NopythonTypeInference

import bartpy_suite as bps
from bartpy_suite import _kernels
from bartpy_suite._kernels.jit import KernelDispatcher


class _Typed(Exception):
    """Carries the typing of a function out of the pipeline that stops after type inference."""

    def __init__(self, state):
        super().__init__("typed")
        self.state = state


@register_pass(mutates_CFG=False, analysis_only=True)
class _StopAfterTyping(AnalysisPass):
    _name = "bartpy_suite_stop_after_typing"

    def __init__(self):
        AnalysisPass.__init__(self)

    def run_pass(self, state):
        raise _Typed(state)


class _TypeOnly(compiler.CompilerBase):
    def define_pipelines(self):
        pm = compiler.DefaultPassBuilder.define_untyped_pipeline(self.state)
        pm.add_pass(NopythonTypeInference, "nopython frontend")
        pm.add_pass(_StopAfterTyping, "stop")
        pm.finalize()
        return [pm]


def typed_state(dispatcher, signature):
    """numba's compiler state of ``dispatcher``'s function typed for ``signature`` (typemap,
    calltypes, the IR after the untyped passes: inlining and dead-branch pruning included)."""
    flags = compiler.Flags()
    flags.nrt = True
    try:
        compiler.compile_extra(cpu_target.typing_context, cpu_target.target_context, dispatcher.py_func,
                               tuple(signature), None, flags, {}, pipeline_class=_TypeOnly)
    except _Typed as done:
        return done.state
    raise AssertionError("the pipeline did not stop after typing")


def slice_copies(state) -> list[str]:
    """Item assignments whose value is an array, as ``line: target[index] = value`` types."""
    found = []
    for block in state.func_ir.blocks.values():
        for stmt in block.body:
            if not isinstance(stmt, (ir.SetItem, ir.StaticSetItem)):
                continue
            value = state.typemap[stmt.value.name]
            if isinstance(value, types.Buffer):
                found.append(f"line {stmt.loc.line}: {state.typemap[stmt.target.name]}[...] = {value}")
    return found


def package_dispatchers():
    for info in pkgutil.iter_modules(_kernels.__path__):
        module = importlib.import_module(f"{_kernels.__name__}.{info.name}")
        for name, obj in vars(module).items():
            if isinstance(obj, KernelDispatcher) and obj.py_func.__module__ == module.__name__:
                yield f"{module.__name__}.{name}", obj


@pytest.fixture(scope="module")
def every_sampler_ran():
    rng = np.random.default_rng(0)
    x = rng.uniform(size=(60, 3))
    df = pd.DataFrame(x, columns=["x0", "x1", "x2"])
    df["y"] = np.sin(3 * x[:, 0]) + 0.2 * rng.standard_normal(60)
    df["c"] = pd.Categorical(np.where(x[:, 0] > 0.5, "a", "b"))
    kw = dict(chains=1, draws=3, tune=2, seed=0, progress=False, check_mixing=False)
    for sampler in ("cgm", "grow_prune", "pg", "smc", "ctmc", "tempered"):
        bps.cart("y ~ x0 + x1", data=df, sampler=sampler, **kw).predict(df.head(3))
    for sampler in ("grow_prune", "cgm", "pg", "ctmc", "tempered"):
        bps.bart("y ~ x0 + x1 + x2", data=df, trees=5, sampler=sampler, **kw).predict(df.head(3))
    bps.bart("c ~ x0 + x1", data=df, trees=5, **kw).predict(df.head(3))
    for sampler in ("hmc_dfi", "hmc_df"):
        bps.soft_tree("y ~ x0 + x1", data=df, sampler=sampler, **kw).predict(df.head(3))


@pytest.mark.slow  # types every kernel of every sampler (37 s); run with -m slow
def test_no_compiled_function_assigns_an_array_to_a_slice(every_sampler_ran):
    # A kernel loaded from the cache leaves its helpers without signatures; typing the kernel
    # gives them theirs (from the cache too), so repeat until a pass finds nothing new.
    checked = set()
    offenders = []
    while True:
        todo = [(name, dispatcher, signature) for name, dispatcher in package_dispatchers()
                for signature in list(dispatcher.signatures) if (name, signature) not in checked]
        if not todo:
            break
        for name, dispatcher, signature in todo:
            checked.add((name, signature))
            offenders += [f"{name} {where}" for where in slice_copies(typed_state(dispatcher, signature))]
    assert len(checked) >= 150, f"only {len(checked)} signatures typed: did the fits compile the kernels?"
    assert not offenders, "use tree.copy_into instead of a[...] = array:\n" + "\n".join(offenders)


def test_the_check_finds_a_slice_copy():
    """The check itself: a function with ``out[d] = row`` is reported."""
    from numba import njit, typeof

    @njit
    def write_row(out, d, row):
        out[d] = row

    args = (np.zeros((2, 3)), 1, np.ones(3))
    write_row(*args)
    (signature,) = write_row.signatures
    assert signature == tuple(typeof(a) for a in args)
    found = slice_copies(typed_state(write_row, signature))
    assert len(found) == 1 and "array(float64, 1d, C)" in found[0]
