"""Numba kernels: pure functions over flat numpy arrays and a numpy ``Generator``.

Import rule: modules here import numpy, numba, math and each other only (never pandas,
xarray, formulaic or any other bartpy_suite layer). Every function is compiled by numba in
nopython mode, cached on disk and without the GIL (so chains can run in parallel threads): as a
``kernel`` when Python code calls it, as a ``helper`` when only compiled code does (``jit.py``).
"""
