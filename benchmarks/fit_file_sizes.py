"""Size of saved fits, time to load and validate them, and that they predict identically after
the round trip (issue: damaged fit files; saved fits are small).

Three fits, each in a fresh subprocess with the package of ``--src`` (default: this checkout), so
that the same script measures an older checkout (e.g. ``git archive <commit> | tar -x -C DIR``):

* ``cart``: the README's single-tree CART, ``bps.cart("y ~ x1 + x2", data=cgm1998, sampler="cgm",
  chains=4, draws=2000, tune=1000, seed=1)``;
* ``multinomial``: log-linear multinomial BART on the wine data (178 rows, 13 predictors, 3
  classes; the issue's 230 penguins are not shipped), package defaults (200 trees per class, 4
  chains x 1,000 draws after 1,000 tuning), seed 1;
* ``bart``: the README's BART, ``bps.bart("y ~ .", data=wu2007, trees=200, sampler="cgm", chains=4,
  draws=1000, tune=1000, seed=1)``.

Per fit: the file size of ``fit.to_netcdf``, the size of each group written alone (the groups
and encoding ``to_netcdf`` writes: ``posterior.fit._tree_to_write``, ``netcdf_write.compact_encoding``;
largest first), the wall and CPU time (the process's, all threads: the steadier number on a
shared machine) of ``bps.load`` and of the file check alone (``posterior.file_check.check_fit``,
when the checkout has it), the number of stored nodes, whether predictions on the training rows
are bit-identical after the round trip, and whether ``arviz_stats.loo`` works on the loaded fit.

Run: ``python3 benchmarks/fit_file_sizes.py [--src DIR] [--out FILE]`` (10-20 minutes on 2 shared
cores). The stored results: ``--out benchmarks/results/fit_file_sizes.json`` (this checkout) and,
for the code before this change, ``git archive 4c428a3 | tar -x -C /tmp/base`` then ``--src
/tmp/base --out benchmarks/results/fit_file_sizes_4c428a3.json``. The JSON records the command,
the machine and the package versions; times are wall seconds on that (shared) machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

RUN = r"""
import json, os, sys, tempfile, time, warnings
import numpy as np
import xarray as xr
import bartpy_suite as bps
warnings.simplefilter("ignore")
name = sys.argv[1]
if name == "cart":
    df = bps.datasets.load("cgm1998")
    fit = bps.cart("y ~ x1 + x2", data=df, sampler="cgm", chains=4, draws=2000, tune=1000, seed=1, progress=False)
elif name == "multinomial":
    from sklearn import datasets
    raw = datasets.load_wine(as_frame=True)
    df = raw.data.copy()
    df.columns = [c.replace("/", "_") for c in df.columns]
    df["y"] = np.asarray(raw.target_names)[raw.target.to_numpy()]
    fit = bps.bart("y ~ .", data=df, seed=1, progress=False)
else:
    df = bps.datasets.load("wu2007")
    fit = bps.bart("y ~ .", data=df, trees=200, sampler="cgm", chains=4, draws=1000, tune=1000, seed=1,
                   progress=False)
kind = "prob" if fit.is_classification else "mean"
before = fit.predict(kind=kind, samples=True).values
had_loglik = "log_likelihood" in fit.idata.children
with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "fit.nc")
    fit.to_netcdf(path)
    size = os.path.getsize(path)
    groups = {}
    # each group written alone with the encoding to_netcdf gave it: its share of the file
    from bartpy_suite.posterior import fit as fit_module
    written = fit_module._tree_to_write(fit.idata, False) if hasattr(fit_module, "_tree_to_write") else fit.idata
    try:  # the encoding moved to posterior.netcdf_write; older commits keep it in fit.py
        from bartpy_suite.posterior.netcdf_write import compact_encoding
    except ImportError:
        compact_encoding = fit_module._compact_encoding
    encoding = compact_encoding(written)
    for node in written.subtree:
        if not node.dataset.data_vars:
            continue
        part = os.path.join(tmp, "part.nc")
        single = xr.DataTree.from_dict({node.path: node.to_dataset()})
        enc = {k: v for k, v in (encoding or {}).items() if k == node.path}
        single.to_netcdf(part, engine="netcdf4", encoding=enc or None)
        groups[node.path] = os.path.getsize(part)
    t0, c0 = time.perf_counter(), time.process_time()
    same = bps.load(path)
    load_s, load_cpu_s = time.perf_counter() - t0, time.process_time() - c0
    check_s = check_cpu_s = None
    try:
        from bartpy_suite.posterior import file_check
        with xr.open_datatree(path, engine="netcdf4") as tree:
            idata = tree.load()
        t0, c0 = time.perf_counter(), time.process_time()
        file_check.check_fit(idata, path)
        check_s, check_cpu_s = time.perf_counter() - t0, time.process_time() - c0
    except ImportError:
        pass
    after = same.predict(kind=kind, samples=True).values
    loo = None
    if had_loglik:
        import arviz_stats as azs
        loo = float(azs.loo(same.idata).elpd)
        loo_before = float(azs.loo(fit.idata).elpd)
print(json.dumps({"fit": name, "file_mb": size / 1e6, "load_s": load_s, "load_cpu_s": load_cpu_s,
                  "check_s": check_s, "check_cpu_s": check_cpu_s, "nodes": int(fit.idata["trees"]["node_var"].size),
                  "identical": bool(np.array_equal(before, after)), "had_log_likelihood": had_loglik,
                  "loo_after_load": loo, "loo_same": None if loo is None else loo == loo_before,
                  "group_mb": {k: v / 1e6 for k, v in sorted(groups.items(), key=lambda kv: -kv[1])}}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", default=os.path.dirname(HERE), help="checkout whose package is measured")
    parser.add_argument("--fits", default="cart,multinomial,bart")
    parser.add_argument("--out", default=None, help="also write the JSON lines here")
    args = parser.parse_args()
    env = dict(os.environ, PYTHONPATH=os.path.abspath(args.src))
    lines = []
    for name in args.fits.split(","):
        # cwd: ``python -c`` puts the working folder first on sys.path, before PYTHONPATH
        done = subprocess.run([sys.executable, "-c", RUN, name], env=env, capture_output=True, text=True,
                              cwd=os.path.abspath(args.src))
        if done.returncode != 0:
            sys.exit(f"{name} failed:\n{done.stderr[-3000:]}")
        line = done.stdout.strip().splitlines()[-1]
        print(line, flush=True)
        lines.append(line)
    if args.out:
        import platform

        import numpy
        import xarray

        meta = {"command": " ".join(["python3", "benchmarks/fit_file_sizes.py"] + sys.argv[1:]),
                "src": os.path.abspath(args.src), "machine": platform.platform(), "processor": platform.processor(),
                "cpus": os.cpu_count(), "python": platform.python_version(), "numpy": numpy.__version__,
                "xarray": xarray.__version__, "seed": 1, "fits": [json.loads(line) for line in lines]}
        with open(args.out, "w") as f:
            json.dump(meta, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
