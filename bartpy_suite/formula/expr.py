"""Formula terms as declarative expression trees: parse, check and evaluate without running Python.

Import rule: this module imports numpy, pandas, :mod:`bartpy_suite.errors` and, inside the
package, ``messages`` and ``codecs`` only (plus the standard library's ``ast``, ``json``,
``keyword``, ``math`` and ``re``); no formulaic. ``terms``, ``design`` and ``build`` import it.

A term such as ``log(x1)``, ``I(x1**2 - 3*x1)`` or ``C(g, levels=['b', 'a'])`` is parsed once, at
fit time, into a small tree of JSON-ready nodes, and that tree is what a saved fit stores and what
``predict`` evaluates, with numpy and pandas operations only. Nothing here calls ``eval``,
``exec`` or ``compile`` (``ast.parse`` only builds a syntax tree), so a fit file edited to hold
``I(x1 + __import__('os').system('...'))`` is refused when it is loaded, naming the term, and
nothing runs. The nodes:

* ``{"col": name}``: a data column (any string; looked up in the data frame, never evaluated);
* ``{"num": value}``: a finite int or float;
* ``{"op": sym, "args": [a, b]}`` with ``sym`` one of ``+ - * / ** // %``, and
  ``{"op": "neg" | "pos", "args": [a]}`` (unary minus and plus);
* ``{"fn": name, "args": [a]}`` with ``name`` in :data:`MATH_FUNCTIONS` (numpy's function of
  that name, element-wise);
* ``{"fn": "C", "args": [a], "levels": null | [labels]}``: a factor, with its level order;
* ``{"fn": "scale", "args": [a], "center": c, "scale": s}``: ``(a - c) / s``, where ``c`` and
  ``s`` are the constants fitted on the training rows (``null``: that step is not applied).
  ``center(x)``, ``scale(x, center=..., scale=..., ddof=...)`` and ``standardize(x, ...)``
  (formulaic's stateful transforms) are all stored this way.

``I(...)`` is the identity and leaves no node; ``Q('name')`` and ```name``` are columns.
Arithmetic and functions compute in float64: integer and bool columns are converted first, so
``I(u + 200)`` on a ``uint8`` column is 300, not 44 (numpy's uint8 wraps modulo 256), and ``C()``
of an arithmetic expression has float labels.
"""

from __future__ import annotations

import ast
import json
import keyword
import math
import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd

from bartpy_suite.errors import FormulaError

from .codecs import _encode
from .messages import _did_you_mean

#: Element-wise functions a term may call, by the name written in a formula (bare or as
#: ``np.<name>`` / ``numpy.<name>``), with the numpy function that computes them.
MATH_FUNCTIONS: dict[str, Any] = {
    "log": np.log, "log2": np.log2, "log10": np.log10, "log1p": np.log1p,
    "exp": np.exp, "exp2": np.exp2, "expm1": np.expm1, "sqrt": np.sqrt, "abs": np.abs,
}

#: What the values outside a function's domain are, for messages about missing values that a
#: transform produced from values that are present.
DOMAIN = {
    "log": "log of a number <= 0", "log2": "log of a number <= 0", "log10": "log of a number <= 0",
    "log1p": "log1p of a number <= -1", "sqrt": "sqrt of a negative number",
    "**": "a fractional power of a negative number", "/": "0 / 0", "//": "a division by 0",
    "%": "a remainder of a division by 0",
}

_BINARY = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**",
           ast.FloorDiv: "//", ast.Mod: "%"}
_BINARY_UFUNCS = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.true_divide,
                  "**": np.power, "//": np.floor_divide, "%": np.mod}
_STATEFUL = {  # name -> (positional parameters after the data, defaults)
    "center": ((), {"center": True, "scale": False, "ddof": 1}),
    "scale": (("center", "scale", "ddof"), {"center": True, "scale": True, "ddof": 1}),
    "standardize": (("center", "rescale", "ddof"), {"center": True, "rescale": True, "ddof": 0}),
}
_CONTRASTS = {"Treatment", "Sum", "Helmert", "Diff", "Poly", "contr"}
_BASIS = {"poly", "bs", "cs", "cc", "cr"}
#: Names formulaic knows that a formula here may not call (row-order or data dependent, or
#: surprising: formulaic 1.2's ``exp10(x)`` is ``x**10``).
_REFUSED_TRANSFORMS = {"lag", "hashed", "exp10", "offset"}

#: Limits on a term's tree, so that a crafted file cannot exhaust the stack or the memory.
MAX_DEPTH = 64
MAX_NODES = 500

#: What a formula term may contain (errors and documentation quote it).
ALLOWED = (
    "A formula term may contain column names (in backquotes, `like this`, or as Q('like this') "
    "when they are not Python names), numbers, the operators + - * / ** // % and unary -, "
    "parentheses, and the functions I(x), C(x, levels=[...]), center(x), "
    "scale(x, center=True, scale=True, ddof=1), standardize(x), "
    + ", ".join(f"{name}(x)" for name in MATH_FUNCTIONS)
    + " (also written np.log(x) and so on); nothing else (no other functions, attributes, "
    "subscripts, comparisons, lambdas or names starting with '__')"
)

#: The functions a term may call, for "did you mean" hints.
FUNCTION_NAMES = ("I", "C", "Q", *_STATEFUL, *MATH_FUNCTIONS)


class ExpressionRefused(FormulaError):
    """A term, typed or read from a file, holds something outside :data:`ALLOWED`.

    ``reason`` says what (``"calls os.system()"``); the caller adds which term.
    """

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class MissingName(Exception):
    """A column the term needs is not in the data frame."""

    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


class NotNumbers(Exception):
    """Arithmetic or a function met values that are not numbers; ``message`` says which."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class Factor:
    """What ``C(x)`` evaluates to: the raw values marked categorical, with optional levels."""

    __slots__ = ("values", "levels")

    def __init__(self, values: Any, levels: list | None):
        self.values = values
        self.levels = levels


# ----------------------------------------------------------------------------------------
# parsing a term's text (typed by the user, or read from a version-1 design) into a tree
# ----------------------------------------------------------------------------------------

# Quoted strings and backquotes, as formulaic splits them (formulaic.utils.code).
_BACKTICK_SPLIT = re.compile(r"(\\\"|\"(?:\\\"|[^\"])*\"|\\'|'(?:\\'|[^'])*'|`)")


def _formulaic_name(name: str) -> str:
    """The identifier formulaic substitutes for a backquoted name (its key for saved state)."""
    if name.isidentifier() or keyword.iskeyword(name):
        return name
    base = "".join(ch if re.match(r"\w", ch) else "_" for ch in name) or "_"
    return "_" + base if base[0].isdigit() else base


def _replace_backquotes(expr: str) -> tuple[str, dict[str, str]]:
    """``expr`` with every backquoted name replaced by an identifier, and identifier -> name."""
    parts = _BACKTICK_SPLIT.split(expr)
    # identifiers written outside backquotes, which an alias must not collide with
    inside, outside_text = False, []
    for part in parts:
        if part == "`":
            inside = not inside
        elif not inside:
            outside_text.append(part)
    taken = set(re.findall(r"[^\W\d]\w*", " ".join(outside_text)))
    out: list[str] = []
    aliases: dict[str, str] = {}
    i = 0
    while i < len(parts):
        part = parts[i]
        if part != "`":
            out.append(part)
            i += 1
            continue
        j = i + 1
        while j < len(parts) and parts[j] != "`":
            j += 1
        if j == len(parts):
            raise ExpressionRefused("has a backquote without its closing backquote")
        name = "".join(parts[i + 1:j])
        alias = next((a for a, n in aliases.items() if n == name), None)
        if alias is None:
            alias = _formulaic_name(name)
            if alias in aliases or alias.startswith("__") or alias in taken:
                alias = f"_bq{len(aliases)}_"
            aliases[alias] = name
        out.append(f" {alias} ")
        i = j + 1
    return "".join(out).strip(), aliases


def parse_term(expr: str) -> dict:
    """Parse one formula term into an expression tree (stateful steps not yet fitted).

    Parameters
    ----------
    expr : str
        The term as formulaic writes it, e.g. ``"log(x1)"``, ``"I(x ** 2)"``,
        ``"C(g, levels=['b', 'a'])"``, ``"scale(`my x`)"``.

    Returns
    -------
    dict
        The tree; ``scale`` nodes carry a ``"fit"`` entry (what to fit) and a ``"key"`` entry
        (formulaic's name of the call, for reading version-1 state) instead of constants.

    Raises
    ------
    ExpressionRefused
        The term holds anything outside :data:`ALLOWED`; ``reason`` says what.
    """
    if not isinstance(expr, str):
        raise ExpressionRefused(f"is not text but {type(expr).__name__}")
    source, aliases = _replace_backquotes(expr)
    try:
        tree = ast.parse(source, mode="eval")  # a syntax tree only: nothing is compiled or run
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        msg = getattr(exc, "msg", None) or type(exc).__name__
        raise ExpressionRefused(f"is not a valid expression ({msg})") from None
    counter = [0]
    return _convert(tree.body, aliases, 0, counter)


def _describe(node: ast.AST) -> str:
    kinds = {
        ast.Attribute: "attribute access", ast.Subscript: "a subscript", ast.Lambda: "a lambda",
        ast.Compare: "a comparison", ast.BoolOp: "a logical operator", ast.IfExp: "a conditional",
        ast.NamedExpr: "an assignment", ast.Starred: "a starred argument",
        ast.JoinedStr: "an f-string", ast.ListComp: "a comprehension",
        ast.GeneratorExp: "a comprehension", ast.DictComp: "a comprehension",
        ast.SetComp: "a comprehension", ast.Dict: "a dict", ast.Set: "a set",
        ast.List: "a list", ast.Tuple: "a tuple",
    }
    what = kinds.get(type(node), f"a {type(node).__name__} expression")
    try:
        text = ast.unparse(node)
    except Exception:  # noqa: BLE001 - only for the message
        text = ""
    return f"{what} ({text})" if text else what


def _convert(node: ast.AST, aliases: dict[str, str], depth: int, counter: list[int]) -> dict:
    counter[0] += 1
    if depth > MAX_DEPTH or counter[0] > MAX_NODES:
        raise ExpressionRefused(
            f"is too large (more than {MAX_DEPTH} levels or {MAX_NODES} parts); compute the column "
            "before fitting and use it directly"
        )
    sub = depth + 1
    if isinstance(node, ast.Name):
        if node.id in aliases:
            return {"col": aliases[node.id]}
        if node.id.startswith("__"):
            raise ExpressionRefused(
                f"uses the name {node.id!r}; names starting with '__' are refused (a column with "
                f"such a name can be written in backquotes, `{node.id}`)"
            )
        return {"col": node.id}
    if isinstance(node, ast.Constant):
        return {"num": _number(node.value)}
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return {"op": _BINARY[type(node.op)],
                "args": [_convert(node.left, aliases, sub, counter),
                         _convert(node.right, aliases, sub, counter)]}
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return {"op": "neg" if isinstance(node.op, ast.USub) else "pos",
                "args": [_convert(node.operand, aliases, sub, counter)]}
    if isinstance(node, ast.Call):
        return _convert_call(node, aliases, sub, counter)
    if isinstance(node, ast.BinOp):
        raise ExpressionRefused(f"uses the operator {type(node.op).__name__} ({ast.unparse(node)})")
    if isinstance(node, ast.UnaryOp):
        raise ExpressionRefused(f"uses the operator {type(node.op).__name__} ({ast.unparse(node)})")
    raise ExpressionRefused(f"contains {_describe(node)}")


def _number(value: Any) -> int | float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        shown = repr(value)
        if isinstance(value, str):
            raise ExpressionRefused(
                f"contains the text {shown}; text is allowed only in C(x, levels=[...]) and "
                "Q('column name')"
            )
        raise ExpressionRefused(f"contains the constant {shown}; only numbers are allowed")
    if isinstance(value, float) and not math.isfinite(value):
        raise ExpressionRefused(f"contains the number {value!r}; numbers must be finite")
    if isinstance(value, int) and abs(value) > 2**63:
        raise ExpressionRefused("contains an integer too large for a float64")
    return value


def _function_name(func: ast.AST) -> str:
    """The called name: ``log`` for ``log`` and ``np.log``; refuse any other attribute."""
    if isinstance(func, ast.Name):
        if func.id.startswith("__"):
            raise ExpressionRefused(f"calls {func.id}(); names starting with '__' are refused")
        return func.id
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and (
        func.value.id in ("np", "numpy")
    ):
        if func.attr in MATH_FUNCTIONS:
            return func.attr
        raise ExpressionRefused(
            f"calls {func.value.id}.{func.attr}(), which is not among the numpy functions a formula "
            f"may use ({', '.join('np.' + n for n in MATH_FUNCTIONS)})"
        )
    raise ExpressionRefused(f"calls {_describe(func)}, which is not a function a formula may use")


def _literal(node: ast.AST, what: str) -> Any:
    """A constant (str, int, float, bool, None), a negative number, or a list/tuple of them."""
    if isinstance(node, ast.Constant) and (node.value is None or isinstance(
            node.value, (str, int, float, bool))):
        if isinstance(node.value, float) and not math.isfinite(node.value):
            raise ExpressionRefused(f"gives {what} the number {node.value!r}; numbers must be finite")
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(
            node.operand, ast.Constant) and isinstance(node.operand.value, (int, float)) and not (
            isinstance(node.operand.value, bool)):
        return -node.operand.value
    if isinstance(node, (ast.List, ast.Tuple)):
        if len(node.elts) > 10_000:
            raise ExpressionRefused(f"gives {what} more than 10000 items")
        items = [_literal(e, what) for e in node.elts]
        if any(isinstance(i, list) for i in items):
            raise ExpressionRefused(f"gives {what} a nested list")
        return items
    raise ExpressionRefused(f"gives {what} {_describe(node)}; only constants are allowed there")


def _check_contrasts(node: ast.AST) -> None:
    """``C``'s contrasts are ignored (trees need none), but must still be harmless constants
    or formulaic's contrast names (``Treatment``, ``contr.sum``, ``Sum('a')``)."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id not in _CONTRASTS:
            raise ExpressionRefused(
                f"gives C() the contrasts {ast.unparse(node)}; contrasts are ignored by trees and "
                f"may only be constants or one of {', '.join(sorted(_CONTRASTS))}"
            )
        if isinstance(sub, ast.Attribute) and not (isinstance(sub.value, ast.Name)
                                                    and sub.value.id == "contr"
                                                    and not sub.attr.startswith("_")):
            raise ExpressionRefused(f"gives C() the contrasts {ast.unparse(node)}, which is not allowed")
        if not isinstance(sub, (ast.Name, ast.Attribute, ast.Call, ast.Constant, ast.List,
                                ast.Tuple, ast.UnaryOp, ast.USub, ast.Load, ast.keyword)):
            raise ExpressionRefused(f"gives C() the contrasts {ast.unparse(node)}, which is not allowed")


def _convert_call(node: ast.Call, aliases: dict[str, str], depth: int, counter: list[int]
                  ) -> dict:
    name = _function_name(node.func)
    args, keywords = node.args, node.keywords
    if any(isinstance(a, ast.Starred) for a in args) or any(k.arg is None for k in keywords):
        raise ExpressionRefused(f"passes *args or **kwargs to {name}()")
    kw = {k.arg: k.value for k in keywords}

    def one_argument(what: str = "one column or expression") -> ast.AST:
        if len(args) != 1 or keywords:
            raise ExpressionRefused(f"calls {name}() with {len(args)} positional argument(s)"
                                    f"{' and keywords' if keywords else ''}; {name}() takes {what}")
        return args[0]

    if name == "I":
        return _convert(one_argument(), aliases, depth, counter)
    if name == "Q":
        arg = one_argument("a column name in quotes, Q('my column')")
        if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
            raise ExpressionRefused("calls Q() with something other than a column name in quotes")
        return {"col": arg.value}
    if name in MATH_FUNCTIONS:
        return {"fn": name, "args": [_convert(one_argument(), aliases, depth, counter)]}
    if name == "C":
        if not args or len(args) > 2 or set(kw) - {"contrasts", "levels", "spans_intercept"}:
            raise ExpressionRefused(
                "calls C() with other arguments than C(x), C(x, levels=[...]) (and contrasts, "
                "which trees ignore)"
            )
        if len(args) == 2 and "contrasts" in kw:
            raise ExpressionRefused("gives C() its contrasts twice")
        for contrasts in ([args[1]] if len(args) == 2 else []) + (
                [kw["contrasts"]] if "contrasts" in kw else []):
            _check_contrasts(contrasts)
        if "spans_intercept" in kw:
            _literal(kw["spans_intercept"], "spans_intercept")
        levels = None
        if "levels" in kw:
            levels = _literal(kw["levels"], "levels=")
            if levels is not None:
                if not isinstance(levels, list):
                    raise ExpressionRefused("gives C() levels= that is not a list of labels")
                levels = [_label(v) for v in levels]
        return {"fn": "C", "args": [_convert(args[0], aliases, depth, counter)], "levels": levels}
    if name in _STATEFUL:
        positional, defaults = _STATEFUL[name]
        if not args or len(args) - 1 > len(positional):
            raise ExpressionRefused(
                f"calls {name}() with {len(args)} positional argument(s); it takes the data and "
                f"at most {len(positional)} more ({', '.join(positional) or 'none'})"
            )
        settings = dict(defaults)
        given = dict(zip(positional, args[1:]))
        for key, value in kw.items():
            if key not in defaults or key in given:
                raise ExpressionRefused(
                    f"calls {name}() with the argument {key!r}; it takes "
                    f"{', '.join(defaults) if positional else 'only the data'}"
                )
            given[key] = value
        for key, value in given.items():
            settings[key] = _literal(value, f"{name}()'s {key}")
        scale = settings.pop("rescale", settings.get("scale"))
        spec = {"center": settings["center"], "scale": scale, "ddof": settings["ddof"]}
        for key in ("center", "scale"):
            if spec[key] is not None and not isinstance(spec[key], (bool, int, float)):
                raise ExpressionRefused(f"gives {name}() {key}={spec[key]!r}; give True, False or a number")
        if isinstance(spec["ddof"], bool) or not isinstance(spec["ddof"], (int, float)):
            raise ExpressionRefused(f"gives {name}() ddof={spec['ddof']!r}; give a number")
        return {"fn": "scale", "args": [_convert(args[0], aliases, depth, counter)],
                "fit": spec, "key": ast.unparse(node)}
    if name in _BASIS:
        raise ExpressionRefused(
            "produces several columns; each term must give one column (trees need no basis "
            "expansions such as poly() or bs(): use the variable itself)"
        )
    if name in _REFUSED_TRANSFORMS or name in _CONTRASTS:
        raise ExpressionRefused(f"calls {name}(), which a formula here may not use")
    raise ExpressionRefused(
        f"uses {name!r}, which is not a function a formula may use"
        f"{_did_you_mean(name, FUNCTION_NAMES)}"
    )


def _label(value: Any) -> Any:
    if value is None or isinstance(value, list):
        raise ExpressionRefused(f"gives C() the level {value!r}; levels must be str, int, float or bool")
    return value


# ----------------------------------------------------------------------------------------
# checking a tree read from a file
# ----------------------------------------------------------------------------------------

def check_tree(obj: Any) -> dict:
    """Check a tree read from a saved design and return it in canonical form.

    Parameters
    ----------
    obj : object
        The decoded JSON value stored for one predictor.

    Returns
    -------
    dict
        A fresh tree holding only validated nodes (a fitted tree: ``scale`` nodes carry their
        constants).

    Raises
    ------
    ExpressionRefused
        Anything but the nodes listed in this module's docstring, or a tree past the size
        limits.
    """
    counter = [0]
    return _check(obj, 0, counter)


def _check(obj: Any, depth: int, counter: list[int]) -> dict:
    counter[0] += 1
    if depth > MAX_DEPTH or counter[0] > MAX_NODES:
        raise ExpressionRefused(f"is too large (more than {MAX_DEPTH} levels or {MAX_NODES} parts)")
    if not isinstance(obj, dict):
        raise ExpressionRefused(f"holds {type(obj).__name__} {_short(obj)} where a node is expected")
    keys = set(obj)

    def args(count: int) -> list[dict]:
        values = obj.get("args")
        if not isinstance(values, list) or len(values) != count:
            raise ExpressionRefused(f"has a node {_short(obj)} without its {count} argument(s)")
        return [_check(v, depth + 1, counter) for v in values]

    if keys == {"col"}:
        if not isinstance(obj["col"], str):
            raise ExpressionRefused(f"has a column name that is not text: {_short(obj['col'])}")
        return {"col": obj["col"]}
    if keys == {"num"}:
        value = obj["num"]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ExpressionRefused(f"has a number node holding {_short(value)}")
        return {"num": _number(value)}
    if keys == {"op", "args"}:
        op = obj["op"]
        if op in _BINARY_UFUNCS:
            return {"op": op, "args": args(2)}
        if op in ("neg", "pos"):
            return {"op": op, "args": args(1)}
        raise ExpressionRefused(f"has the operator {_short(op)}; allowed: {', '.join(_BINARY_UFUNCS)}, neg, pos")
    if "fn" in keys:
        fn = obj["fn"]
        if keys == {"fn", "args"} and fn in MATH_FUNCTIONS:
            return {"fn": fn, "args": args(1)}
        if keys == {"fn", "args", "levels"} and fn == "C":
            levels = obj["levels"]
            if levels is not None:
                if not isinstance(levels, list) or any(
                        not isinstance(v, (str, int, float, bool))
                        or (isinstance(v, float) and not math.isfinite(v)) for v in levels):
                    raise ExpressionRefused(f"has C() levels that are not a list of labels: {_short(levels)}")
                levels = list(levels)
            return {"fn": "C", "args": args(1), "levels": levels}
        if keys == {"fn", "args", "center", "scale"} and fn == "scale":
            out = {"fn": "scale", "args": args(1)}
            for key in ("center", "scale"):
                value = obj[key]
                if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                    raise ExpressionRefused(f"has scale() {key} {_short(value)}, not a number")
                out[key] = None if value is None else float(value)
            return out
        raise ExpressionRefused(
            f"calls {_short(fn)} with the fields {sorted(keys)}, which is not an allowed function: "
            f"{', '.join(('C', 'scale', *MATH_FUNCTIONS))}"
        )
    raise ExpressionRefused(f"has a node with the fields {sorted(map(str, keys))}, which is not allowed")


def _short(obj: Any) -> str:
    text = repr(obj)
    return text if len(text) <= 80 else text[:77] + "..."


# ----------------------------------------------------------------------------------------
# properties of trees
# ----------------------------------------------------------------------------------------

def nodes(tree: dict) -> Iterator[dict]:
    """Every node of ``tree``, depth first."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.get("args", [])))


def columns_of(tree: dict) -> list[str]:
    """The data columns ``tree`` reads, sorted."""
    return sorted({node["col"] for node in nodes(tree) if "col" in node})


def is_stateful(tree: dict) -> bool:
    """Whether ``tree`` holds constants fitted on the training rows (``center``, ``scale``)."""
    return any(node.get("fn") == "scale" for node in nodes(tree))


def explicit_levels(tree: dict) -> list | None:
    """The ``levels=`` of a ``C()`` at the top of ``tree`` (the one that decides the factor)."""
    return tree.get("levels") if tree.get("fn") == "C" else None


def domain_text(tree: dict) -> str:
    """Why ``tree`` makes a missing value from values that are present
    (``"outside its domain, e.g. log of a number <= 0"``)."""
    found = []
    for node in nodes(tree):
        text = DOMAIN.get(node.get("fn") or node.get("op", ""))
        if text and text not in found:
            found.append(text)
    return "outside its domain" + (", e.g. " + " or ".join(found) if found else "")


def fill_legacy_state(tree: dict, state: Any) -> dict:
    """Put the constants of a version-1 design's formulaic state into the ``scale`` nodes.

    ``state`` maps formulaic's name of each stateful call (``"center(x1)"``) to
    ``{"center": c, "scale": s, "ddof": d}``. Raises :class:`ExpressionRefused` when a node's
    constants are missing or not numbers.
    """
    pending = [node for node in _breadth_first(tree) if node.get("fn") == "scale" and "fit" in node]
    if not pending:
        return _fitted(tree, {})
    if not isinstance(state, dict):
        raise ExpressionRefused("has no saved constants for its center()/scale()")
    found: dict[int, tuple] = {}
    unmatched = [node for node in pending if node["key"] not in state]
    if unmatched and len(pending) == len(state):
        # formulaic's names of backquoted columns can carry a random suffix: match by position
        # (formulaic stores the calls in the order of ast.walk, breadth first, as here)
        by_key = dict(zip((n["key"] for n in pending), state.values()))
    else:
        by_key = state
    for node in pending:
        entry = by_key.get(node["key"])
        if not isinstance(entry, dict):
            raise ExpressionRefused(f"has no saved constants for {node['key']}")
        values = []
        for key in ("center", "scale"):
            value = entry.get(key)
            if value is not None:
                array = np.asarray(value)
                if array.dtype.kind not in "biuf" or array.size != 1:
                    raise ExpressionRefused(f"has saved {key} {_short(value)} for {node['key']}, not a number")
                value = float(array.reshape(()))
            values.append(value)
        found[id(node)] = tuple(values)
    return _fitted(tree, found)


def _breadth_first(tree: dict) -> list[dict]:
    out, queue = [], [tree]
    while queue:
        node = queue.pop(0)
        out.append(node)
        queue.extend(node.get("args", []))
    return out


def _fitted(tree: dict, constants: dict[int, tuple]) -> dict:
    """A copy of ``tree`` in canonical stored form, with the given constants in ``scale`` nodes."""
    out = {k: v for k, v in tree.items() if k not in ("args", "fit", "key")}
    if "args" in tree:
        out["args"] = [_fitted(a, constants) for a in tree["args"]]
    if tree.get("fn") == "scale" and "fit" in tree:
        out["center"], out["scale"] = constants[id(tree)]
    return {key: out[key] for key in ("col", "num", "op", "fn", "args", "levels", "center", "scale")
            if key in out}


def to_text(trees: list[dict]) -> str:
    """Canonical JSON of fitted trees (non-finite constants tagged as in ``codecs``)."""
    return json.dumps(_encode(trees), allow_nan=False)


# ----------------------------------------------------------------------------------------
# evaluation: numpy and pandas only
# ----------------------------------------------------------------------------------------

def evaluate(tree: dict, frame: pd.DataFrame, *, fit: bool = False) -> tuple[Any, dict]:
    """Evaluate ``tree`` on the rows of ``frame``.

    Parameters
    ----------
    tree : dict
        A tree from :func:`parse_term` (``fit=True``) or a fitted one (``fit=False``).
    frame : pandas.DataFrame
        The data; never modified.
    fit : bool, default False
        Fit the constants of ``center``/``scale`` on these rows (training) instead of using the
        stored ones (new data).

    Returns
    -------
    value : pandas.Series, numpy.ndarray, float or Factor
        A column as stored in ``frame`` (a bare column or ``I(x)``), float64 values
        (arithmetic, functions, ``scale``), a float (a term without columns) or a
        :class:`Factor` (``C()``).
    fitted : dict
        The tree in stored form, with the constants used.

    Raises
    ------
    MissingName
        A column is not in ``frame``.
    NotNumbers
        Arithmetic, a function or ``scale`` met text, a factor or dates.
    """
    constants: dict[int, tuple] = {}
    with np.errstate(all="ignore"):
        value = _eval(tree, frame, fit, constants)
    return value, (_fitted(tree, constants) if fit else tree)


def _eval(node: dict, frame: pd.DataFrame, fit: bool, constants: dict[int, tuple]) -> Any:
    if "col" in node:
        name = node["col"]
        if not isinstance(name, str) or name not in frame.columns:
            raise MissingName(name)
        return frame[name]
    if "num" in node:
        return np.float64(node["num"])
    args = [_eval(a, frame, fit, constants) for a in node["args"]]
    if "op" in node:
        op = node["op"]
        if op == "neg":
            return np.negative(_numbers(args[0], "unary -"))
        if op == "pos":
            return np.positive(_numbers(args[0], "unary +"))
        return _BINARY_UFUNCS[op](_numbers(args[0], op), _numbers(args[1], op))
    fn = node["fn"]
    if fn == "C":
        value, levels = args[0], node["levels"]
        if isinstance(value, Factor):
            return Factor(value.values, value.levels if levels is None else list(levels))
        return Factor(value, None if levels is None else list(levels))
    if fn == "scale":
        data = np.array(_numbers(args[0], "center()/scale()"), dtype=np.float64)
        if data.ndim != 1:
            raise NotNumbers("center()/scale() got a constant, not a column")
        if fit and "fit" in node:
            # formulaic's scale(), step by step, so that the fitted constants are the same
            spec = node["fit"]
            center = spec["center"]
            c = (np.mean(data, axis=0) if center is True
                 else None if center is False or center is None else np.float64(center))
            if c is not None:
                data = data - c
            scale = spec["scale"]
            s = (np.sqrt(np.sum(data**2, axis=0) / (data.shape[0] - spec["ddof"])) if scale is True
                 else None if scale is False or scale is None else np.float64(scale))
            if s is not None:
                data = data / s
            constants[id(node)] = (None if c is None else float(c), None if s is None else float(s))
            return data
        if "fit" in node:
            raise FormulaError("internal error: a center()/scale() term was used before it was fitted")
        if node["center"] is not None:
            data = data - np.float64(node["center"])
        if node["scale"] is not None:
            data = data / np.float64(node["scale"])
        return data
    return MATH_FUNCTIONS[fn](_numbers(args[0], f"{fn}()"))


def _numbers(value: Any, what: str) -> Any:
    """``value`` as float64 numbers (bool and integers converted first), or :class:`NotNumbers`."""
    if isinstance(value, (np.ndarray, np.floating)):
        return value
    if isinstance(value, Factor):
        raise NotNumbers(f"{what} got a factor made by C(); C() can only be the outermost call of a term")
    series = value
    dtype = series.dtype
    name = series.name
    if isinstance(dtype, pd.CategoricalDtype):
        raise NotNumbers(f"{what} needs numbers, but column {name!r} is a factor (dtype category)")
    if pd.api.types.is_datetime64_any_dtype(dtype) or pd.api.types.is_timedelta64_dtype(dtype):
        raise NotNumbers(
            f"{what} needs numbers, but column {name!r} holds dates or times (dtype {dtype}); "
            f"convert them first, e.g. (df[{name!r}] - df[{name!r}].min()).dt.days or "
            f"df[{name!r}].dt.year"
        )
    if pd.api.types.is_bool_dtype(dtype) or (
            pd.api.types.is_numeric_dtype(dtype) and dtype.kind != "c"):
        return series.to_numpy(dtype=np.float64, na_value=np.nan)
    if pd.api.types.is_object_dtype(dtype) and pd.api.types.infer_dtype(series, skipna=True) in (
            "integer", "floating", "mixed-integer-float", "empty", "boolean"):
        try:
            return series.to_numpy(dtype=np.float64, na_value=np.nan)
        except (TypeError, ValueError):
            pass
    example = series.dropna().iloc[:1].tolist()
    shown = f", e.g. {example[0]!r}" if example else ""
    kind = "text" if pd.api.types.is_string_dtype(dtype) or pd.api.types.is_object_dtype(dtype) else "values"
    raise NotNumbers(f"{what} needs numbers, but column {name!r} holds {kind} (dtype {dtype}{shown})")
