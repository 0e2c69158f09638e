"""Package list for setuptools (everything else is in pyproject.toml).

The top-level ``data/`` folder is installed as the package ``bartpy_suite.data`` (mapped by
``[tool.setuptools.package-dir]`` in pyproject.toml), so the repository keeps one copy of the
data sets. pyproject.toml cannot add a mapped package to the ones ``packages.find`` discovers,
hence this file.
"""

from setuptools import find_packages, setup

setup(packages=[*find_packages(include=["bartpy_suite", "bartpy_suite.*"]), "bartpy_suite.data"])
