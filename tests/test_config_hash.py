"""numba's compile flags hash and compare as before with the cheaper methods of
``_kernels/config_hash.py``, which are in place only while this package compiles."""

from __future__ import annotations

import itertools

from numba.core.compiler import Flags
from numba.core.targetconfig import TargetConfig

from bartpy_suite._kernels import config_hash, link_only


def _variants() -> list[Flags]:
    """Flags with nothing set, options set to their default, to other values, in other orders."""
    plain = Flags()
    default_set = Flags()
    default_set.nrt = Flags.options["nrt"].default
    nrt = Flags()
    nrt.nrt = True
    nrt_nogil = Flags()
    nrt_nogil.nrt = True
    nrt_nogil.release_gil = True
    nogil_nrt = Flags()  # the same options set in the other order
    nogil_nrt.release_gil = True
    nogil_nrt.nrt = True
    wrapperless = Flags(copy_from=nrt)
    wrapperless.no_cpython_wrapper = True
    return [plain, default_set, nrt, nrt_nogil, nogil_nrt, wrapperless]


def _replacement(name):
    return next(fn for owner, attr, fn in config_hash.replacements() if owner is TargetConfig and attr == name)


def test_in_place_only_while_the_package_compiles():
    """numba's own methods outside ``link_only.compiling`` (issue 29), the replacements inside."""
    original = (TargetConfig.__dict__["__hash__"], TargetConfig.__dict__["__eq__"])
    assert original[0].__module__ == "numba.core.targetconfig"
    with link_only.compiling():
        assert TargetConfig.__dict__["__hash__"] is _replacement("__hash__")
        assert TargetConfig.__dict__["__eq__"] is _replacement("__eq__")
    assert (TargetConfig.__dict__["__hash__"], TargetConfig.__dict__["__eq__"]) == original


def test_hash_and_equality_as_numba_computes_them():
    original_hash, original_eq = TargetConfig.__hash__, TargetConfig.__eq__
    assert original_hash.__module__ == "numba.core.targetconfig"  # numba's own, not the replacement
    new_hash, new_eq = _replacement("__hash__"), _replacement("__eq__")
    flags = _variants()
    for a in flags:
        assert new_hash(a) == original_hash(a)
    for a, b in itertools.product(flags, repeat=2):
        assert new_eq(a, b) == original_eq(a, b), (a, b)
    # the cases that matter: a default set explicitly equals it unset; a changed option differs
    assert flags[0] == flags[1] and flags[0] != flags[2] and flags[3] == flags[4] and flags[2] != flags[5]


def test_flags_work_as_dict_keys():
    flags = _variants()
    with link_only.compiling():  # filled with the replacements in place...
        table = {f: i for i, f in enumerate(flags)}
        assert table[Flags()] == 1  # plain and default_set are one key; the later value wins
        assert table[flags[4]] == 4 and table[flags[5]] == 5
        assert len(table) == 4
    # ... and looked up with numba's own: the same hashes, the same keys
    assert table[Flags()] == 1 and table[flags[4]] == 4 and table[flags[5]] == 5
