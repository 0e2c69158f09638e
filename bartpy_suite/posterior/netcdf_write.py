"""Writing a posterior's DataTree to a netCDF file: compact encoding and an atomic write.

Shared by ``Fit.to_netcdf`` and the bcf file writer (``bcf_file.save_causal``), so both refuse the same
bad paths with the same messages and neither can leave a half-written file behind.

Imports numpy, xarray and the package's errors only.
"""

from __future__ import annotations

import os
import uuid

import numpy as np
import xarray as xr

from ..errors import ArgumentError


def smallest_int(values: np.ndarray) -> np.dtype:
    """The smallest signed integer dtype holding every value of ``values``."""
    if values.size == 0:
        return np.dtype(np.int8)
    low, high = int(values.min()), int(values.max())
    for dtype in (np.int8, np.int16, np.int32):
        info = np.iinfo(dtype)
        if info.min <= low and high <= info.max:
            return np.dtype(dtype)
    return np.dtype(np.int64)


def compact_encoding(idata: xr.DataTree) -> dict:
    """netCDF encoding per group: shuffle + zlib on every variable (the shuffle filter groups the
    bytes of equal significance, which zlib then compresses far better: float64 leaf values and
    multi-byte integers), integers narrowed to their range."""
    encoding = {}
    for node in idata.subtree:
        group = {}
        for name, da in node.dataset.data_vars.items():
            spec = {"zlib": True, "complevel": 4, "shuffle": True}
            if da.dtype.kind in "iub":
                spec["dtype"] = smallest_int(da.values.astype(np.int64))
            group[name] = spec
        if group:
            encoding[node.path] = group
    return encoding


def write_tree_atomically(tree: xr.DataTree, path, example_name: str) -> None:
    """Write ``tree`` to ``path`` with :func:`compact_encoding`, through a temporary name in the same
    folder and a rename, so a failure leaves nothing half-written and an existing file untouched.

    Parameters
    ----------
    tree : xarray.DataTree
        What to write.
    path : str or os.PathLike
        The file to write (replaced if it exists).
    example_name : str
        A file name suggested when ``path`` is a folder.

    Raises
    ------
    ArgumentError
        When ``path`` is a folder or its folder does not exist.
    OSError
        When the file cannot be written (the message names ``path``).
    """
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise ArgumentError(f"cannot write the fit to {path!r}: it is a folder; give a file name, e.g. "
                            f"{os.path.join(path, example_name)!r}")
    if not os.path.isdir(folder):
        raise ArgumentError(f"cannot write {path!r}: folder {folder!r} does not exist")
    # O_EXCL on a random name, like mkstemp, but with mode 0o666 so that the umask applies and
    # the saved file gets the permissions of any other new file (mkstemp's are 0o600)
    tmp = os.path.join(folder, f".{os.path.basename(path)}.{uuid.uuid4().hex[:12]}.part")
    try:
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    except OSError as exc:
        raise type(exc)(exc.errno, f"cannot write the fit to {path!r}: {exc.strerror}") from exc
    try:
        tree.to_netcdf(tmp, engine="netcdf4", encoding=compact_encoding(tree))
        os.replace(tmp, path)
    except BaseException as exc:
        if os.path.exists(tmp):
            os.remove(tmp)
        if isinstance(exc, OSError) and exc.errno is not None:
            raise type(exc)(exc.errno, f"cannot write the fit to {path!r}: {exc.strerror}") from exc
        raise
