"""Entry point of ``python -m bartpy_suite``; see :mod:`bartpy_suite.cli`."""

from __future__ import annotations

from bartpy_suite.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
