"""The compiled functions' parameter counts may not regrow (issue 29, "Kernel interface").

Long signatures of same-typed arrays are where an argument swap compiles and samples the wrong
posterior; records (``_kernels/records.py``, ``TreeArrays``, ``Scratch``, the chain states) keep
them short. This counts the parameters of every function decorated ``@kernel`` or ``@helper``
in the package (read from the source, nothing compiled) and fails when more of them take over
10 parameters, or any takes more, than when the limits below were last lowered. Lower them when
a change shortens signatures; never raise them.
"""

from __future__ import annotations

import ast
from pathlib import Path

import bartpy_suite

PACKAGE = Path(bartpy_suite.__file__).resolve().parent

#: At most this many compiled functions take more than ``LONG`` parameters ... (81 before the
#: records; issue 29's target 5; left: ``cart_moves._grow_log_r``, ``_rewire_and_score`` and
#: ``tree.var_rule_count``, whose histogram arrays stay separate arguments because passing the
#: chain's ``Scratch`` to ``has_available_rule`` cost particle Gibbs CART 8% of its CPU)
MAX_LONG_SIGNATURES = 3
LONG = 10
#: ... and none takes more than this (``cart_moves._grow_log_r``; 33 before the records).
MAX_PARAMETERS = 13


def compiled_signatures() -> list[tuple[int, str]]:
    """``(parameter count, "module.function")`` of every ``@kernel`` / ``@helper`` function."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef):
                continue
            names = {ast.unparse(d).split("(")[0].rsplit(".", 1)[-1] for d in node.decorator_list}
            if names & {"kernel", "helper"}:
                a = node.args
                count = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs)
                out.append((count, f"{path.relative_to(PACKAGE).with_suffix('')}.{node.name}"))
    return out


def test_the_census_sees_the_kernels():
    """The parser finds the compiled functions (a census of none would pass every limit)."""
    names = {name for _, name in compiled_signatures()}
    assert "_kernels/cart_chain.run_cart_chain" in names
    assert len(names) > 200


def test_long_signatures_do_not_regrow():
    sigs = sorted(compiled_signatures(), reverse=True)
    long = [(n, name) for n, name in sigs if n > LONG]
    print(f"\n{len(long)} compiled functions take more than {LONG} parameters; the most: {sigs[0]}")
    assert len(long) <= MAX_LONG_SIGNATURES, long
    assert sigs[0][0] <= MAX_PARAMETERS, sigs[:5]
