"""Test-run configuration: the modules in ``IN_CHILD`` run in a child pytest process.

Why: numba keeps every kernel it compiles in memory for the life of the process, and a freshly
compiled kernel holds about twice the memory of one loaded from numba's disk cache (its LLVM
module is kept). Run in one process, the default test run accumulated the kernels of every
model, sampler and test-only helper and peaked at 2.19 GiB (the issue's run; 2.33 GiB maximum resident
set size under ``/usr/bin/time -v`` in ours, with a cold numba cache). The modules listed here are the
ones that compiled the most (their tests' power is unchanged: they run exactly as written, with
the same options, only in another process). A child returns its memory when it ends, and the
kernels it compiled are in the disk cache when the main process needs them, so the main process
loads instead of compiling them.

When the session collects tests of more than one module, the selected tests of each listed module
are replaced by one item, ``<module>::[child process]``, which runs exactly those test ids with
``python3 -m pytest`` (the same ``-m`` expression and ``--timeout``) and fails with the child's
report if any of them fails. The children run one at a time in the background from the end of
collection on, while this process runs the other modules, so a 2-core machine uses both cores
(the child items wait for their child's result; ``BARTPY_SUITE_TESTS_CHILDREN_IN_TURN=1`` starts
each child only when its item runs, as before). Running a listed module on its own (``pytest tests/test_x.py``), or
setting ``BARTPY_SUITE_TESTS_IN_ONE_PROCESS=1``, runs it in this process as usual.
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

IN_CHILD = {
    # module: what it compiles; in MiB, the growth of the single process's resident memory over the
    # module in a default run with a cold numba cache, all in one process (run of 2026-11-26); the Geweke
    # modules are all slow (not in the default run). Modules that add nothing to the process
    # (test_tempered_bart, test_soft_tree: +0, their kernels compiled by test_kernel_entry_points's
    # child and loaded from the cache) stay in it: a child costs a few seconds of start-up
    "test_arviz.py": "the first CART and BART fits of the run: cgm, grow_prune, the log-likelihood (+458 over imports)",
    "test_cart_api.py": "CART's leaf models and samplers (+96)",
    "test_ctmc_api.py": "ctmc for CART and its leaf models (+207)",
    "test_ctmc_rotate.py": "ctmc with rotate and perturb events (+133)",
    "test_ctmc_exact.py": "in-memory twins of the ctmc rate helpers (+68)",
    "test_kernel_entry_points.py": "a fit of every model and sampler (+215; +343 when the others ran in children)",
    "test_move_ratios.py": "in-memory twins of the single MH moves (+87; +69 when the others ran in children)",
    "test_pg_ancestor.py": "in-memory twins of the ancestor-sampling weights (+82; +127 when the others ran in children)",
    "test_rotate_perturb.py": "rotate and perturb inside cgm (+96; +55 when the others ran in children)",
    "test_geweke_bart.py": "BART's Geweke simulators",
    "test_geweke_multiclass.py": "multinomial BART's Geweke simulators",
    "test_multiclass.py": "multinomial BART (+42)",
    "test_particle.py": "pg and smc (+69)",
    "test_tempered.py": "tempered CART and its ladders (+18)",
    "test_soft_kernels.py": "in-memory twins of the soft-tree and NUTS helpers (+47)",
    "test_vignettes.py": "every vignette in quick mode: most models and samplers (+49, +117 at its peak)",
    "test_readme_examples.py": "the README's examples: CART, BART, probit, soft trees, scikit-learn (new)",
}
_CHILD_ENV = "BARTPY_SUITE_TESTS_IN_ONE_PROCESS"
_IN_TURN_ENV = "BARTPY_SUITE_TESTS_CHILDREN_IN_TURN"
#: runs the children one after another, beside this process's own tests (created at collection)
_BACKGROUND: list[ThreadPoolExecutor] = []


class _ChildFailed(Exception):
    """The child pytest process reported failures; the message is its report."""


class ChildProcessRun(pytest.Item):
    """Runs the selected tests of one module in a child pytest process."""

    def __init__(self, *, nodeids: list[str], **kwargs):
        super().__init__(**kwargs)
        self.nodeids = nodeids
        # the child applies the per-test timeout to each of its tests; this item has none of its own
        self.add_marker(pytest.mark.timeout(0))

    def command(self) -> list[str]:
        """The child's ``python3 -m pytest`` command line."""
        config = self.config
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", config.option.markexpr or ""]
        timeout = getattr(config.option, "timeout", None)
        if timeout:
            command.append(f"--timeout={timeout}")
        return command + self.nodeids

    def run_child(self) -> subprocess.CompletedProcess:
        env = dict(os.environ, **{_CHILD_ENV: "1"})
        return subprocess.run(self.command(), cwd=self.config.rootpath, env=env, capture_output=True, text=True)

    def runtest(self) -> None:
        future = getattr(self, "future", None)
        done = future.result() if future is not None else self.run_child()
        if done.returncode != 0:
            raise _ChildFailed(f"{len(self.nodeids)} tests of {self.path.name} ran in a child process, "
                               f"which exited with status {done.returncode}:\n{done.stdout[-20000:]}\n"
                               f"{done.stderr[-5000:]}")

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, _ChildFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        return self.path, None, f"{self.path.name}: {len(self.nodeids)} tests in a child process"


@pytest.hookimpl(trylast=True)  # after -m and -k have deselected tests: the child runs what is left
def pytest_collection_modifyitems(session, config, items):
    if os.environ.get(_CHILD_ENV) == "1":
        return
    modules = {item.path for item in items}
    if len(modules) < 2:
        return
    replaced: dict = {}
    kept = []
    for item in items:
        if item.path.name in IN_CHILD:
            module = item.getparent(pytest.Module)
            if module not in replaced:
                replaced[module] = []
                kept.append(module)
            replaced[module].append(item.nodeid)
        else:
            kept.append(item)
    items[:] = [ChildProcessRun.from_parent(entry, name="[child process]", nodeids=replaced[entry])
                if isinstance(entry, pytest.Module) else entry for entry in kept]
    if config.option.collectonly or os.environ.get(_IN_TURN_ENV) == "1":
        return
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="child-tests")
    _BACKGROUND.append(pool)
    for item in items:
        if isinstance(item, ChildProcessRun):
            item.future = pool.submit(item.run_child)


def pytest_sessionfinish(session, exitstatus):
    """Children not yet started when the session ends early (``-x``, an interrupt) are not started."""
    while _BACKGROUND:
        _BACKGROUND.pop().shutdown(wait=True, cancel_futures=True)


@pytest.fixture(scope="session")
def cgm():
    """The shipped CGM 1998 example (x1 numeric, x2 a factor with levels A-D, y): the data of most
    API tests. Shared by the whole session; the package never modifies a frame it is given
    (the last tests of ``tests/test_cart_api.py`` check that), so no test gets a changed copy."""
    from bartpy_suite import datasets

    return datasets.load("cgm1998")

