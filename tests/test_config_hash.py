"""numba's compile flags hash and compare as before with the cheaper methods of
``_kernels/config_hash.py``."""

from __future__ import annotations

import itertools

from numba.core.compiler import Flags
from numba.core.targetconfig import TargetConfig

from bartpy_suite._kernels import config_hash


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


def test_installed_on_import():
    assert config_hash.installed()
    assert "_bartpy_original_methods" in TargetConfig.__dict__


def test_hash_and_equality_as_numba_computes_them():
    original_hash, original_eq = TargetConfig._bartpy_original_methods
    flags = _variants()
    for a in flags:
        assert hash(a) == original_hash(a)
    for a, b in itertools.product(flags, repeat=2):
        assert (a == b) == original_eq(a, b), (a, b)
    # the cases that matter: a default set explicitly equals it unset; a changed option differs
    assert flags[0] == flags[1] and flags[0] != flags[2] and flags[3] == flags[4] and flags[2] != flags[5]


def test_flags_work_as_dict_keys():
    flags = _variants()
    table = {f: i for i, f in enumerate(flags)}
    assert table[Flags()] == 1  # plain and default_set are one key; the later value wins
    assert table[flags[4]] == 4 and table[flags[5]] == 5
    assert len(table) == 4
