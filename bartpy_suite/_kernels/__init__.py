"""Numba kernels: pure functions over flat numpy arrays and a numpy ``Generator``.

Import rule: modules here import numpy, numba, math and each other only (never pandas,
xarray, formulaic or any other bartpy_suite layer). Every function is
``@njit(cache=True, nogil=True)`` so chains can run in parallel threads.
"""
