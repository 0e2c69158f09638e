"""Data sets shipped with bartpy_suite (see README.md here); read them with bartpy_suite.datasets.load."""
