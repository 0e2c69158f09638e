"""numba's on-disk cache for this package's kernels, keyed on the sources of all of ``_kernels/``.

numba checks a cached function against its own source file and bytecode only. A kernel links (or
inlines) helpers from other modules, so after a helper was edited numba would load the kernel's
old machine code, compiled against the old helper: old code running against new data layouts (a
segmentation fault was seen from it). Here every kernel and helper caches under a directory named
after a hash of every ``_kernels/*.py`` file, the numba and llvmlite versions and whether the
link-only overrides are available (their cache entries need them to load), e.g.
``_kernels/__pycache__/bartpy-0123456789abcdef/`` (or the same under ``NUMBA_CACHE_DIR``). Any
edit of a kernel file therefore sends the next run to a fresh directory, where every kernel
compiles once; an unchanged tree loads from the directory it filled.

When a process first writes to its directory, it deletes the sibling directories left by other
source versions (``bartpy-`` followed by 16 hex digits, nothing else), so the cache does not grow
with every edit. A process still running an older version of the sources loses its cache entries
and compiles what it has not loaded yet again (numba treats a missing file as a miss).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from pathlib import Path

import llvmlite
import numba

from . import link_only

try:
    from numba.core.caching import CompileResultCacheImpl, FunctionCache, _CacheLocator
except ImportError:  # pragma: no cover - a numba whose caching module differs: no disk cache at all
    CompileResultCacheImpl = FunctionCache = _CacheLocator = None

__all__ = ["KernelCache", "SOURCES", "available", "source_tag"]

#: The directory whose ``*.py`` files the cache is keyed on.
SOURCES = Path(__file__).resolve().parent
_TAG_PATTERN = re.compile(r"bartpy-[0-9a-f]{16}")
_pruned: set[str] = set()  # cache directories this process has pruned the siblings of


def _compute_tag(sources: Path = SOURCES) -> str:
    digest = hashlib.sha256()
    for part in (numba.__version__, llvmlite.__version__, str(link_only.available())):
        digest.update(part.encode() + b"\0")
    for path in sorted(sources.glob("*.py")):
        digest.update(path.name.encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return "bartpy-" + digest.hexdigest()[:16]


_TAG = _compute_tag()


def source_tag() -> str:
    """The name of this process's cache directory: ``bartpy-`` and 16 hex digits of the hash of the
    kernel sources (as they were when the package was imported), numba's and llvmlite's versions."""
    return _TAG


def available() -> bool:
    """Whether numba's caching classes are as expected; if not, kernels are not cached on disk
    (compiled in every process) rather than cached without the source key."""
    return _CacheLocator is not None


class _SourceHashLocator(_CacheLocator or object):
    """numba's locator for a function (in-tree ``__pycache__``, ``NUMBA_CACHE_DIR``...) with the
    source tag appended to its directory."""

    def __init__(self, inner: _CacheLocator):
        self._inner = inner

    def get_cache_path(self) -> str:
        return os.path.join(self._inner.get_cache_path(), _TAG)

    def ensure_cache_path(self) -> None:
        path = self.get_cache_path()
        os.makedirs(path, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()  # writable, as numba's own check
        _prune_siblings(os.path.dirname(path))

    def get_source_stamp(self):
        return self._inner.get_source_stamp()

    def get_disambiguator(self) -> str:
        return self._inner.get_disambiguator()

    @classmethod
    def from_function(cls, py_func, py_file):  # pragma: no cover - built by _Impl only
        raise NotImplementedError


def _prune_siblings(parent: str) -> None:
    """Delete the cache directories of other source versions under ``parent`` (once per process)."""
    if parent in _pruned:
        return
    _pruned.add(parent)
    try:
        names = os.listdir(parent)
    except OSError:
        return
    for name in names:
        if name != _TAG and _TAG_PATTERN.fullmatch(name):
            # ignore_errors: another process may be writing or deleting there at the same time
            shutil.rmtree(os.path.join(parent, name), ignore_errors=True)


class _Impl(CompileResultCacheImpl or object):
    def __init__(self, py_func):
        super().__init__(py_func)
        self._locator = _SourceHashLocator(self._locator)


class KernelCache(FunctionCache or object):
    """numba's ``FunctionCache`` with its files under the source-tag directory (module docstring)."""

    _impl_class = _Impl
