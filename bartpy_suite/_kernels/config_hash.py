"""Cheaper hashing and comparison of numba's compile flags, with the same results, while this
package compiles.

While typing a call of one of numba's ``@overload`` functions (``np.empty``, ``min``, ``int``...),
numba looks up its compiled implementations in a dict keyed by ``(context, args, kws, flags)``,
once per candidate template and per round of type propagation: about 33,500 hashes and 44,000
comparisons in a first CART fit. ``TargetConfig.__hash__`` builds the dict of all 22 options to
hash their sorted *names*, a value that depends only on the flags' class; and every lookup that
meets an entry of equal hash (all entries, since the hash is constant) compares two such dicts.
At 7-8 microseconds each that was about 0.5 CPU s of a first fit; the replacements take 0.1-0.6
(issue 11, section 1; ``benchmarks/results/compile_time.md``).

The replacements return exactly what numba's do: the hash is computed once per class, and two
flags of the same class are compared through the options they set, each unset option standing for
its default. So a dict filled while they are in place is looked up the same way after they are
gone. They are not installed on import: ``link_only.compiling`` puts them on ``TargetConfig`` for
the duration of one of this package's compilations and puts numba's own back afterwards (issue
29). They exist only if numba's methods are the ones this was written against (numba 0.65 to
0.68); ``tests/test_config_hash.py`` checks both against the originals.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["replacements"]


def _build() -> list[tuple[type, str, Callable]]:
    try:
        from numba.core.targetconfig import TargetConfig
    except ImportError:  # pragma: no cover - numba always has it today
        return []
    original_hash = TargetConfig.__dict__.get("__hash__")
    original_eq = TargetConfig.__dict__.get("__eq__")
    expected = "numba.core.targetconfig"
    if (getattr(original_hash, "__module__", None) != expected or getattr(original_eq, "__module__", None) != expected
            or "_values" not in getattr(TargetConfig, "__slots__", ())):
        return []
    class_hash: dict[type, int] = {}

    def __hash__(self) -> int:
        cls = type(self)
        value = class_hash.get(cls)
        if value is None:
            value = class_hash[cls] = original_hash(self)
        return value

    def __eq__(self, other):
        if type(other) is not type(self):
            return original_eq(self, other)
        mine, theirs = self._values, other._values
        if mine == theirs:
            return True
        options = type(self).options
        for name in mine.keys() | theirs.keys():
            default = options[name].default
            if mine.get(name, default) != theirs.get(name, default):
                return False
        return True

    return [(TargetConfig, "__hash__", __hash__), (TargetConfig, "__eq__", __eq__)]


_REPLACEMENTS = _build()


def replacements() -> list[tuple[type, str, Callable]]:
    """``(class, attribute, replacement)`` for ``TargetConfig.__hash__`` and ``__eq__``.

    Returns
    -------
    list of tuple
        Empty if numba's methods are not the ones these replace (another numba version): numba's
        own are then used throughout.
    """
    return list(_REPLACEMENTS)
