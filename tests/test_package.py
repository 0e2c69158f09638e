import bartpy_suite
from bartpy_suite.errors import ArgumentError, BartpySuiteError


def test_version_and_error_hierarchy():
    assert bartpy_suite.__version__ == "0.1.0"
    assert issubclass(ArgumentError, ValueError)
    assert issubclass(ArgumentError, BartpySuiteError)
