"""A safe evaluator of the arithmetic expressions of MBSE mechanism files (no ``eval``).

MBSE files (``mbfg.mbse_yaml``) write coordinates, lengths, masses and inertias as
numbers or as expressions such as ``"(1/3)*mass*length^2"`` over parameters; this
module parses them with :mod:`ast` and evaluates only numbers, names given by the
caller, ``pi``, the operators ``+ - * / ^`` and the functions of :data:`FUNCTIONS`.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable, Mapping

from mbfg.errors import ModelError

__all__ = ["CONSTANTS", "FUNCTIONS", "evaluate_expression"]


#: Functions usable in expressions: name -> (callable, number of arguments; None = 1 or more).
#: Trigonometric functions take and return radians.
FUNCTIONS: dict[str, tuple[Callable[..., float], int | None]] = {
    "cos": (math.cos, 1),
    "sin": (math.sin, 1),
    "tan": (math.tan, 1),
    "acos": (math.acos, 1),
    "asin": (math.asin, 1),
    "atan": (math.atan, 1),
    "atan2": (math.atan2, 2),
    "sqrt": (math.sqrt, 1),
    "abs": (abs, 1),
    "exp": (math.exp, 1),
    "log": (math.log, 1),
    "log10": (math.log10, 1),
    "hypot": (math.hypot, 2),
    "pow": (math.pow, 2),
    "min": (min, None),
    "max": (max, None),
    "deg2rad": (math.radians, 1),
    "rad2deg": (math.degrees, 1),
}

#: Constants usable in every expression.
CONSTANTS: dict[str, float] = {"pi": math.pi}

_BINARY_OPS: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
}
_UNARY_OPS: dict[type[ast.unaryop], Callable[[float], float]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}
_MAX_EXPRESSION_CHARS = 2000
#: Names an MBSE file defines only in some places (x<k>, y<k> of point k; a body's length<k>): an unknown
#: one gets a hint, and a parameter may not take one.
POINT_COORDINATE_NAME = re.compile(r"^[xy][0-9]+$")
BODY_LENGTH_NAME = re.compile(r"^length[0-9]+$")


class _ExpressionError(Exception):
    """Internal: what is wrong with an expression (wrapped into ModelError with its entry)."""


def _describe(node: ast.AST) -> str:
    """Human name of a disallowed syntax node."""
    names = {
        ast.Attribute: "attribute access ('.')",
        ast.Subscript: "indexing ('[...]')",
        ast.Compare: "comparisons",
        ast.BoolOp: "'and'/'or'",
        ast.IfExp: "'if ... else'",
        ast.Lambda: "lambda",
        ast.Tuple: "tuples (',')",
        ast.List: "lists",
        ast.Dict: "dicts",
        ast.Set: "sets",
        ast.JoinedStr: "strings",
    }
    for kind, text in names.items():
        if isinstance(node, kind):
            return text
    return type(node).__name__


class _Evaluator:
    """Evaluates a parsed expression tree over a whitelist of node types."""

    def __init__(self, variables: Mapping[str, float]) -> None:
        self.variables = variables

    def __call__(self, node: ast.AST) -> float:
        if isinstance(node, ast.Expression):
            return self(node.body)
        if isinstance(node, ast.Constant):
            value = node.value
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise _ExpressionError(f"only numbers are allowed as literals, got {value!r}")
            return float(value)  # floats throughout: no huge integer powers
        if isinstance(node, ast.Name):
            return self._name(node.id)
        if isinstance(node, ast.BinOp):
            op = _BINARY_OPS.get(type(node.op))
            if op is None:
                raise _ExpressionError(
                    f"operator {type(node.op).__name__} is not allowed; use + - * / ^ (power)"
                )
            return op(self(node.left), self(node.right))
        if isinstance(node, ast.UnaryOp):
            uop = _UNARY_OPS.get(type(node.op))
            if uop is None:
                raise _ExpressionError(f"unary operator {type(node.op).__name__} is not allowed")
            return uop(self(node.operand))
        if isinstance(node, ast.Call):
            return self._call(node)
        raise _ExpressionError(f"{_describe(node)} not allowed; expected arithmetic on numbers and names")

    def _name(self, name: str) -> float:
        if name in self.variables:
            return float(self.variables[name])
        if name in CONSTANTS:
            return CONSTANTS[name]
        if name in FUNCTIONS:
            raise _ExpressionError(f"function {name!r} used without arguments, e.g. {name}(x)")
        known = sorted(set(self.variables) | set(CONSTANTS))
        hint = ""
        if POINT_COORDINATE_NAME.match(name):
            hint = " (x<k>, y<k> are the coordinates of point k, 0-based, of earlier points only)"
        elif BODY_LENGTH_NAME.match(name) or name in ("length", "mass", "I0", "auto", "index"):
            hint = " (body names exist only inside planar_bodies entries, once evaluated)"
        raise _ExpressionError(f"unknown name {name!r}{hint}; known names: {', '.join(known) or 'none'}")

    def _call(self, node: ast.Call) -> float:
        if not isinstance(node.func, ast.Name):
            raise _ExpressionError(f"only plain function calls are allowed, not calls of {_describe(node.func)}")
        fname = node.func.id
        if fname not in FUNCTIONS:
            what = "a variable, not a function" if fname in self.variables or fname in CONSTANTS else "unknown"
            raise _ExpressionError(
                f"function {fname!r} is {what}; known functions: {', '.join(sorted(FUNCTIONS))}"
            )
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            raise _ExpressionError(f"{fname}() takes plain positional arguments only")
        func, arity = FUNCTIONS[fname]
        n_args = len(node.args)
        if (arity is None and n_args == 0) or (arity is not None and n_args != arity):
            expected = "one or more arguments" if arity is None else f"{arity} argument(s)"
            raise _ExpressionError(f"{fname}() takes {expected}, got {n_args}")
        args = [self(a) for a in node.args]
        return float(func(*args))


def evaluate_expression(
    expression: str | int | float,
    variables: Mapping[str, float] | None = None,
    *,
    where: str = "expression",
) -> float:
    """Evaluate an MBSE arithmetic expression safely (no ``eval``) to a finite float.

    Args:
        expression: a YAML number, or a string such as ``"(1/3)*mass*length^2"``.
            ``^`` is power (translated to ``**`` before parsing).
        variables: names usable in the expression (units as the caller defines
            them: [m], [kg], [kg m^2], [rad]); ``pi`` and :data:`FUNCTIONS` are
            always available.
        where: the entry named in error messages, e.g. ``"file.yaml: points[3].x"``.

    Raises:
        ModelError: on a syntax error, an unknown name or function, a disallowed
            construct (attribute access, calls of anything but :data:`FUNCTIONS`,
            strings, comparisons ...), a math error or a non-finite result.
    """
    variables = {} if variables is None else variables
    if isinstance(expression, bool):
        raise ModelError(f"{where}: expected a number or an expression string, got boolean {expression}")
    if isinstance(expression, (int, float)):
        value = float(expression)
        if not math.isfinite(value):
            raise ModelError(f"{where}: expected a finite number, got {expression}")
        return value
    if not isinstance(expression, str):
        raise ModelError(
            f"{where}: expected a number or an expression string, got {type(expression).__name__} {expression!r}"
        )
    text = expression.strip()
    if not text:
        raise ModelError(f"{where}: expected a number or an expression, got an empty string")
    if len(text) > _MAX_EXPRESSION_CHARS:
        raise ModelError(f"{where}: expression longer than {_MAX_EXPRESSION_CHARS} characters")
    # MBSE (exprtk) writes power as '^'; Python's '^' is XOR, which the grammar
    # has no use for, so every '^' is a power. Replacing the text before parsing
    # gives it power's precedence (a XOR node would bind looser than '*').
    python_text = text.replace("^", "**")
    try:
        tree = ast.parse(python_text, mode="eval")
    except SyntaxError as exc:
        detail = exc.msg if exc.msg else "invalid syntax"
        raise ModelError(f"{where}: bad expression {expression!r}: syntax error ({detail})") from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise ModelError(f"{where}: bad expression {expression!r}: {type(exc).__name__}") from None
    try:
        value = _Evaluator(variables)(tree)
    except _ExpressionError as exc:
        raise ModelError(f"{where}: bad expression {expression!r}: {exc}") from None
    except ZeroDivisionError:
        raise ModelError(f"{where}: expression {expression!r} divides by zero") from None
    except OverflowError:
        raise ModelError(f"{where}: expression {expression!r} overflows") from None
    except (ValueError, TypeError) as exc:
        raise ModelError(f"{where}: expression {expression!r} cannot be evaluated: {exc}") from None
    except RecursionError:
        raise ModelError(f"{where}: expression {expression!r} is nested too deeply") from None
    if isinstance(value, complex) or not math.isfinite(value):
        raise ModelError(f"{where}: expression {expression!r} gives {value}, expected a finite real number")
    return value
