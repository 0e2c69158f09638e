"""The kernels' disk cache is keyed on the sources of all of ``_kernels/`` (``_kernels/cache.py``):
editing a helper in one module makes a kernel in another recompile instead of loading its old
machine code, and an unchanged tree loads from the cache.

Runs a temporary copy of the package in child processes (the in-tree ``__pycache__`` of the copy
is the cache), with a helper and a kernel in two modules added to the copy's ``_kernels/``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import bartpy_suite
from bartpy_suite._kernels import cache

PACKAGE = Path(bartpy_suite.__file__).resolve().parent

HELPER = '''
from .jit import helper


@helper
def scale(x):
    return x * {factor}
'''

KERNEL = '''
from .jit import kernel
from .zz_probe_helper import scale


@kernel
def probe(x):
    return scale(x) + 1
'''

CHILD = '''
import json, os
from bartpy_suite._kernels import cache, zz_probe_kernel as k
value = int(k.probe(3))
stats = k.probe.stats
print("RESULT " + json.dumps({"value": value, "hits": sum(stats.cache_hits.values()),
                              "misses": sum(stats.cache_misses.values()), "tag": cache.source_tag(),
                              "path": stats.cache_path}))
'''


def _copy_package(root: Path) -> Path:
    target = root / "bartpy_suite"
    shutil.copytree(PACKAGE, target, ignore=shutil.ignore_patterns("__pycache__", "*.nbi", "*.nbc", "*.pyc"))
    kernels = target / "_kernels"
    (kernels / "zz_probe_helper.py").write_text(HELPER.format(factor=2))
    (kernels / "zz_probe_kernel.py").write_text(KERNEL)
    return kernels


def _run(root: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}  # the copy's own __pycache__
    env["PYTHONPATH"] = str(root)
    proc = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=300,
                          cwd=root)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(s for s in proc.stdout.splitlines() if s.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def test_source_tag_names_a_hash_of_the_kernel_sources(tmp_path):
    kernels = _copy_package(tmp_path)
    tag = cache._compute_tag(kernels)
    assert cache._TAG_PATTERN.fullmatch(tag)
    assert cache._compute_tag(kernels) == tag  # deterministic
    (kernels / "zz_probe_helper.py").write_text(HELPER.format(factor=3))
    assert cache._compute_tag(kernels) != tag
    (kernels / "zz_probe_helper.py").write_text(HELPER.format(factor=2))
    assert cache._compute_tag(kernels) == tag


def test_an_edited_helper_recompiles_its_callers_and_an_unchanged_tree_loads(tmp_path):
    kernels = _copy_package(tmp_path)
    pycache = kernels / "__pycache__"
    first = _run(tmp_path)
    assert first["value"] == 3 * 2 + 1
    assert (first["hits"], first["misses"]) == (0, 1)
    assert Path(first["path"]) == pycache / first["tag"]
    assert any((pycache / first["tag"]).glob("zz_probe_kernel.probe-*.nbc"))

    again = _run(tmp_path)  # nothing changed: loaded from the cache
    assert again["value"] == 3 * 2 + 1
    assert (again["hits"], again["misses"]) == (0 + 1, 0)
    assert again["tag"] == first["tag"]

    # Edit the helper only. numba alone would load probe's old machine code (its own file and
    # bytecode are unchanged) and return 7.
    (kernels / "zz_probe_helper.py").write_text(HELPER.format(factor=3))
    edited = _run(tmp_path)
    assert edited["value"] == 3 * 3 + 1
    assert (edited["hits"], edited["misses"]) == (0, 1)
    assert edited["tag"] != first["tag"]
    # The directory of the old sources was pruned when the new one was first written.
    assert sorted(p.name for p in pycache.iterdir() if cache._TAG_PATTERN.fullmatch(p.name)) == [edited["tag"]]
