"""Machine code only for functions something can call: numba's libraries of wrapper-less
functions are kept as LLVM IR to link into their callers.

numba compiles every jitted function into a library of its own and finalises it at once: it links
in the libraries of the function's callees, optimises the whole module and generates machine code
for it. A caller later links the callee's (optimised) IR into its own module, optimises the whole
again and generates its own machine code. So for a call graph of depth d, the deepest functions are
optimised and turned into machine code d times, and most of those copies are never run.

A function compiled without a CPython wrapper and without a C callback wrapper (our ``helper``
functions) cannot be called from outside compiled code: its machine code is dead, and its
module-level optimisation is repeated in every caller anyway. While this package's dispatchers
compile (``compiling``), such a function's library is finalised as *link-only*: it skips the module
passes and the machine code and keeps only its function-level optimised IR, which callers link in
and optimise as part of their own module. Its cache entry holds that IR alone. A kernel (which has
a CPython wrapper) is optimised and compiled as before, with its callees' IR linked in; the draws
are bit-identical and the speed per sweep unchanged, while the first CART fit compiled in a third
less time (53.5 -> 36.6 CPU s, ``benchmarks/results/compile_time.md``, issue 11 section 1).
numba's own ``overload`` implementations keep their C callback wrappers and are compiled as usual.

The switch is a small set of overrides of numba's ``CPUCodeLibrary``, ``CPUContext`` and
``CompileResult`` (and ``config_hash``'s of ``TargetConfig``) that act only on libraries marked
link-only. They are in place only inside ``compiling``, which this package's dispatchers enter
around every compilation and cache load (``jit.KernelDispatcher.compile``): the outermost block
puts them on the classes and puts numba's own back when it ends, so numba behaves as shipped for
every other compilation in the process (issue 29). The block holds numba's compiler lock
(``numba.core.compiler_lock.global_compiler_lock``, a reentrant lock that numba's own
``Dispatcher.compile`` takes for every compilation and cache load): while the classes are patched
no other thread can compile, so another thread's ``@numba.njit`` waits for the package's compile
to end and then compiles with numba unchanged. That adds no waiting that numba did not already
impose, since numba compiles one function at a time anyway.

If numba is not a version the overrides were checked against (``TESTED_NUMBA``) or its internals
differ from what they expect (``available()`` is False), nothing is ever patched and every
function is compiled the usual way: slower to compile, the same draws. ``tests/test_link_only.py``,
``test_numba_confined.py`` (the confinement, with a CART fit, and the fallback),
``test_kernel_cache.py`` and ``test_config_hash.py`` pass with numba 0.65.1, 0.66.0, 0.67.0 and
0.68.1 (llvmlite 0.47-0.50, numpy 2.4); ``pyproject.toml`` pins ``numba>=0.65,<0.69`` to match.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from numba.core.compiler_lock import global_compiler_lock

from . import config_hash

__all__ = ["TESTED_NUMBA", "available", "compiling", "in_scope", "is_link_only", "numba_is_tested", "patched_names"]

#: numba versions (major, minor), from first to last, the overrides were checked against.
TESTED_NUMBA = ((0, 65), (0, 68))

_LINK_ONLY_KIND = "bartpy_suite.link_only"
_ENV_PREFIX = "_ZN08NumbaEnv"
_MISSING = object()
_state = threading.local()  # per thread: depth of this package's compilations (``in_scope``)
_saved: list[tuple[type, str, object]] = []


def numba_is_tested(version: str | None = None) -> bool:
    """Whether numba ``version`` (default: the one imported) is in ``TESTED_NUMBA``."""
    if version is None:
        import numba

        version = numba.__version__
    try:
        major_minor = tuple(int(part) for part in version.split(".")[:2])
    except ValueError:  # not "major.minor...": unknown
        return False
    return TESTED_NUMBA[0] <= major_minor <= TESTED_NUMBA[1]


def _numba_internals():
    """numba's classes and functions the overrides replace, or None if any is missing."""
    if not numba_is_tested():
        return None
    try:
        import llvmlite.binding as llvm
        from numba import _dynfunc
        from numba.core import codegen, compiler, cpu
        from numba.core.environment import lookup_environment
    except ImportError:  # pragma: no cover - numba always has these today
        return None
    library = getattr(codegen, "CPUCodeLibrary", None)
    context = getattr(cpu, "CPUContext", None)
    result = getattr(compiler, "CompileResult", None)
    needed = [(library, "_finalize_final_module"), (library, "_optimize_final_module"),
              (library, "serialize_using_object_code"), (library, "_unserialize"),
              (library, "_finalize_dynamic_globals"), (library, "_get_module_for_linking"),
              (context, "get_executable"), (result, "_find_referenced_environments"),
              (_dynfunc, "make_function")]
    if any(owner is None or not hasattr(owner, name) for owner, name in needed):
        return None
    return llvm, _dynfunc, library, context, result, lookup_environment


def is_link_only(library) -> bool:
    """Whether numba ``library`` was finalised as link-only (IR for callers, no machine code)."""
    return getattr(library, "_bartpy_link_only", False)


def _has_entry(module, name: str) -> bool:
    try:
        return not module.get_function(name).is_declaration
    except NameError:
        return False


def _build() -> list[tuple[type, str, object]]:
    """``(owner, attribute, replacement)`` for every override, or [] if numba is not as expected."""
    internals = _numba_internals()
    if internals is None:
        return []
    llvm, dynfunc, library_cls, context_cls, result_cls, lookup_environment = internals
    finalize_final_module = library_cls._finalize_final_module
    optimize_final_module = library_cls._optimize_final_module
    serialize_using_object_code = library_cls.serialize_using_object_code
    unserialize = library_cls._unserialize.__func__
    get_executable = context_cls.get_executable
    find_referenced_environments = result_cls._find_referenced_environments

    def _finalize_final_module(self):
        if not is_link_only(self):
            return finalize_final_module(self)
        # No execution engine, no machine code: the module is only ever linked into callers.
        self._finalize_dynamic_globals()
        verify = getattr(self, "_verify_declare_only_symbols", None)
        if verify is not None:
            verify()
        self._finalized = True

    def _optimize_final_module(self):
        if not is_link_only(self):
            optimize_final_module(self)

    def _serialize_using_object_code(self):
        if not is_link_only(self):
            return serialize_using_object_code(self)
        self._ensure_finalized()
        return (self.name, _LINK_ONLY_KIND, self._get_module_for_linking().as_bitcode())

    def _unserialize(cls, codegen, state):
        name, kind, data = state
        if kind != _LINK_ONLY_KIND:
            return unserialize(cls, codegen, state)
        self = codegen.create_library(name)
        self._bartpy_link_only = True
        self._final_module = llvm.parse_bitcode(data)
        self._shared_module = self._final_module
        self._finalized = True
        return self

    def _get_executable(self, library, fndesc, env):
        if (in_scope() and not library._finalized and not is_link_only(library)
                and not _has_entry(library._final_module, fndesc.llvm_cpython_wrapper_name)
                and not _has_entry(library._final_module, fndesc.llvm_cfunc_wrapper_name)):
            library._bartpy_link_only = True
        if not is_link_only(library):
            executable = get_executable(self, library, fndesc, env)
            if any(is_link_only(linked) for linked in getattr(library, "_linking_libraries", ())):
                _point_at_environments(library)
            return executable
        # numba's placeholder for a function without a CPython wrapper (address 0): never called.
        return dynfunc.make_function(fndesc.lookup_module(), fndesc.qualname.split(".")[-1],
                                     f"link-only {fndesc.qualname!r}", 0, env, (library,))

    def _point_at_environments(library):
        # The environment globals of link-only callees now live in this library's machine code
        # alone; numba sets them only for its own function (and for all of them when a cached
        # library is loaded), so point them at their environments here. Without it, boxing the
        # arguments of an exception raised in a callee fails.
        engine = library.codegen._engine
        for gv in library._final_module.global_variables:
            if not gv.name.startswith(_ENV_PREFIX):
                continue
            env = lookup_environment(gv.name)
            address = engine.get_global_value_address(gv.name) if env is not None else 0
            if address:
                ctypes.c_void_p.from_address(address).value = id(env)

    def _find_referenced_environments_(self):
        # A link-only library has no globals in the execution engine to point at its environments;
        # the callers that link it in hold (and set) their own.
        if is_link_only(self.library):
            return []
        return find_referenced_environments(self)

    return [(library_cls, "_finalize_final_module", _finalize_final_module),
            (library_cls, "_optimize_final_module", _optimize_final_module),
            (library_cls, "serialize_using_object_code", _serialize_using_object_code),
            (library_cls, "_unserialize", classmethod(_unserialize)),
            (context_cls, "get_executable", _get_executable),
            (result_cls, "_find_referenced_environments", _find_referenced_environments_)]


def in_scope() -> bool:
    """Whether one of this package's dispatchers is compiling on this thread."""
    return getattr(_state, "depth", 0) > 0


def _put_in_place() -> None:
    _put_back()  # what an interrupted _put_back left in place (a KeyboardInterrupt inside it)
    for owner, name, replacement in _OVERRIDES:
        _saved.append((owner, name, owner.__dict__.get(name, _MISSING)))
        setattr(owner, name, replacement)


def _put_back() -> None:
    # numba's own objects back exactly as they were in each class's namespace (an inherited
    # attribute is deleted again rather than copied down).
    # Each entry leaves _saved only once restored, so an interrupted pass leaves the rest for the
    # next one.
    while _saved:
        owner, name, original = _saved[-1]
        if original is _MISSING:
            if name in owner.__dict__:
                delattr(owner, name)
        else:
            setattr(owner, name, original)
        _saved.pop()


@contextmanager
def compiling() -> Iterator[None]:
    """Compile inside the block as this package: numba's compiler lock held, the overrides in
    place (entered first on any thread; nested blocks reuse them) and numba's own methods back
    when the outermost block ends, also on an error. Wrapper-less functions compiled on this
    thread inside the block are finalised link-only."""
    # The block holds the (reentrant) compiler lock from entry to exit, so one thread at a time is
    # inside and its own depth tells the outermost block. Everything that changes numba happens
    # inside the try: a KeyboardInterrupt landing anywhere after the lock is taken (even halfway
    # through _put_in_place, whose _saved entries are appended before each replacement) still
    # puts numba's methods back, and the with statement releases the lock.
    with global_compiler_lock:
        depth = getattr(_state, "depth", 0)
        try:
            _state.depth = depth + 1
            if depth == 0:
                _put_in_place()
            yield
        finally:
            _state.depth = depth
            if depth == 0:
                _put_back()


_LINK_ONLY_OVERRIDES = _build()
_OVERRIDES = _LINK_ONLY_OVERRIDES + (config_hash.replacements() if numba_is_tested() else [])


def available() -> bool:
    """Whether the link-only overrides exist for this numba (installed only inside ``compiling``)."""
    return bool(_LINK_ONLY_OVERRIDES)


def patched_names() -> list[str]:
    """``Class.attribute`` of every numba attribute ``compiling`` replaces while it runs."""
    return [f"{owner.__module__}.{owner.__qualname__}.{name}" for owner, name, _ in _OVERRIDES]
