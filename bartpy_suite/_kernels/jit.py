"""The two ways a function here is compiled: ``kernel`` (called from Python) and ``helper``
(called only from other compiled functions).

Both compile in nopython mode, without the GIL, and cache on disk: a kernel its machine code, a
helper the LLVM IR its callers link in (``link_only.py``). They differ in the wrappers numba builds
around the machine code. Every compiled function normally gets a CPython wrapper (to be called
from Python) and a C callback wrapper. For a function taking
``TreeArrays`` or ``Scratch``, named tuples of 13-17 arrays, the CPython wrapper unboxes and
reference-counts every array. That wrapper is then optimised again, with the function, in every
caller's final module. For a function that is only ever called from compiled code it is dead
weight, and it was most of a first fit's compile time (issue 11, section 1;
``benchmarks/results/compile_time.md``).

A ``kernel`` gets the CPython wrapper only: nothing here takes a kernel's C address (numba's
first-class functions, ``cfunc``), and for a BART chain runner the C callback wrapper was 5-8% of
the instructions LLVM optimised. ``helper`` builds neither wrapper. Calling such a function
straight from Python would run numba's entry point without a wrapper (a crash), so the dispatcher
class below sends a Python call to a twin of the same function compiled the usual way (in memory,
not cached). A test or a debugging session can therefore call any helper. Fitting, prediction and
the posterior call only ``kernel`` functions from Python (``tests/test_kernel_entry_points.py``);
the twins serve the single-move and single-rate methods the exact tests use. Compiling a kernel or
a helper (or loading it from the cache) runs inside ``link_only.compiling``: numba's compiler lock
held, the link-only and ``config_hash`` overrides in place for that compilation only, so its
wrapper-less callees get no machine code of their own while numba stays as shipped for everyone
else. The disk cache of both is keyed on the sources of all of ``_kernels/`` (``cache.py``), so
editing a helper recompiles the kernels that link it.
"""

from __future__ import annotations

from collections.abc import Callable

from numba import njit
from numba.core import types
from numba.core.registry import CPUDispatcher

from . import cache, link_only
from .compile_gc import fewer_collections

__all__ = ["kernel", "helper"]

_TARGET_OPTIONS = {"nopython": True, "nogil": True, "boundscheck": None}


def _one_kind(arg_type):
    """``arg_type`` without its literal value, and widened to int64 if a narrower signed integer."""
    plain = types.unliteral(arg_type)
    if isinstance(plain, types.Integer) and plain.signed and plain.bitwidth < 64:
        return types.int64
    return plain


class KernelDispatcher(CPUDispatcher):
    """A numba dispatcher whose compilations count as this package's (``link_only.compiling``):
    callees without wrappers are kept as IR for linking, not turned into machine code. Its disk
    cache is keyed on the kernel sources (``cache.KernelCache``)."""

    def compile(self, sig):
        # Every path to a compilation or a cache load (a Python call, typing a compiled caller,
        # unpickling) goes through ``compile``, so the overrides are in place for all of them.
        with fewer_collections(), link_only.compiling():
            return super().compile(sig)

    def enable_caching(self):
        """Cache on disk, under the directory of the current kernel sources (``cache.py``); not at
        all if numba's caching classes are not the expected ones (never a cache without that key)."""
        if cache.available():
            self._cache = cache.KernelCache(self.py_func)

    def get_call_template(self, args, kws):
        """Type a compiled call with one signature per argument kind: constants as their plain
        type and signed integers as int64. numba would otherwise compile the helper again for
        every literal (``f(tree, 0)`` next to ``f(tree, node)``) and for int32 node indices read
        from the tree arrays next to int64 loop indices: 2-5 CPU s of a first fit (issue 11
        section 1). The caller casts its arguments to the signature."""
        return super().get_call_template(tuple(_one_kind(a) for a in args),
                                         {k: _one_kind(v) for k, v in kws.items()})


def kernel(fn: Callable) -> KernelDispatcher:
    """Compile ``fn`` as a kernel that Python code calls (``njit(cache=True, nogil=True)``).

    Parameters
    ----------
    fn : callable
        A nopython-compatible Python function.

    Returns
    -------
    KernelDispatcher
        The numba dispatcher.
    """
    # Reference counting stated, not inherited: numba would otherwise compile a kernel called from a
    # borrowing helper without it, and the Python callers would then share that compilation.
    # No C callback wrapper (module docstring).
    dispatcher = KernelDispatcher(py_func=fn, locals={},
                                  targetoptions=dict(_TARGET_OPTIONS, _nrt=True, no_cfunc_wrapper=True))
    dispatcher.enable_caching()
    return dispatcher


class HelperDispatcher(KernelDispatcher):
    """A dispatcher compiled without the CPython and C callback wrappers.

    Compiled callers link its IR (``link_only``: it gets no machine code of its own); a call from
    Python goes to an ordinary, uncached ``njit`` twin of the same Python function.
    """

    def add_overload(self, cres):
        """Check a fresh compilation without reference counting (``_check_borrowing``) before numba
        keeps it or writes it to the cache."""
        if not self.targetoptions.get("_nrt", True):
            _check_borrowing(self.py_func, cres)
        super().add_overload(cres)

    def __call__(self, *args, **kwargs):
        twin = self.__dict__.get("_python_twin")
        if twin is None:
            twin = njit(nogil=True)(self.py_func)
            self.__dict__["_python_twin"] = twin
        return twin(*args, **kwargs)


def _holds_references(context, ty) -> bool:
    """Whether values of numba type ``ty`` carry a reference count (arrays, tuples of arrays...)."""
    return context.data_model_manager[ty].contains_nrt_meminfo()


def _check_borrowing(py_func, cres) -> None:
    """Refuse a helper compiled without reference counting that could unbalance a count: it may
    neither return a value that carries one nor call a compiled function that returns one (the
    new reference would never be released)."""
    fndesc = getattr(cres, "fndesc", None)
    annotation = getattr(cres, "type_annotation", None)
    if fndesc is None or not hasattr(annotation, "calltypes"):  # from the cache: checked when compiled
        return
    context = cres.target_context
    where = f"{py_func.__module__}.{py_func.__qualname__}"
    if _holds_references(context, fndesc.restype):
        raise TypeError(f"helper {where} borrows its arguments (refcounts=False) but returns "
                        f"{fndesc.restype}, which holds references: compile it with refcounts=True")
    typemap = annotation.typemap
    for expr, sig in annotation.calltypes.items():
        if getattr(expr, "op", None) != "call" or sig is None:
            continue
        callee = typemap.get(expr.func.name)
        if isinstance(callee, types.Dispatcher) and _holds_references(context, sig.return_type):
            raise TypeError(f"helper {where} borrows its arguments (refcounts=False) but calls "
                            f"{callee.dispatcher.py_func.__qualname__}, which returns {sig.return_type}: "
                            f"compile {where} with refcounts=True")


def helper(fn: Callable | None = None, *, inline: bool = False, refcounts: bool = False,
           fastmath: set[str] | None = None) -> HelperDispatcher | Callable:
    """Compile ``fn`` as a helper that only compiled functions call.

    Parameters
    ----------
    fn : callable
        A nopython-compatible Python function (omit it to get a decorator with options).
    inline : bool
        Inline the function into its compiled callers at numba's IR level instead of linking it
        (``inline="always"``). Meant for a driver with a single compiled caller, such as one
        sweep of a chain inside its runner: numba finalises every linked function as a library of
        its own, optimising and generating machine code for its whole call graph once more, so
        each level saved is one such pass (``benchmarks/results/compile_time.md``). Also for a
        small function that builds views for its caller (``backfit.tree_view``): inlined, the
        views belong to the caller, which can then borrow (``refcounts``).
    refcounts : bool
        Compile with numba's reference counting (``_nrt``). Off by default: a helper borrows the
        arrays its caller holds and emits no increment or decrement, which in BART's hot loop was
        a third of the time (an atomic operation per array of every ``TreeArrays`` and ``Scratch``
        argument per call) and a large part of the IR to compile. A helper that allocates an
        array, returns one (or a tuple holding one) or calls a function that returns one needs
        ``refcounts=True``; the compile fails with a message saying so otherwise.
    fastmath : set of str or None
        LLVM fast-math flags for this function's own floating-point operations (numba's
        ``fastmath``), e.g. ``{"reassoc"}`` to let a sum vectorise where its rounding does not
        matter. Callers keep their own exact arithmetic.

    Returns
    -------
    HelperDispatcher
        The numba dispatcher; see the module docstring for what a call from Python does.
    """
    if fn is None:
        return lambda f: helper(f, inline=inline, refcounts=refcounts, fastmath=fastmath)
    options = dict(_TARGET_OPTIONS, no_cpython_wrapper=True, no_cfunc_wrapper=True, _nrt=refcounts)
    if inline:
        options["inline"] = "always"
    if fastmath:
        options["fastmath"] = set(fastmath)
    dispatcher = HelperDispatcher(py_func=fn, locals={}, targetoptions=options)
    dispatcher.enable_caching()
    return dispatcher
