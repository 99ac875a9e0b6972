"""A safe arithmetic evaluator: parses with ``ast`` and walks an allow-list of nodes (never ``eval``).

Allowed: numbers, + - * / // % **, unary signs, parentheses, and the functions min, max, abs,
round, sqrt, log (natural), log10, exp, ceil, floor. Exponents are capped so a power cannot hang the
process, and every result must be finite.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable

MAX_EXPRESSION_LENGTH = 500
MAX_EXPONENT = 100
FUNCTIONS: dict[str, Callable[..., float]] = {
    "min": min, "max": max, "abs": abs, "round": round, "sqrt": math.sqrt, "log": math.log,
    "log10": math.log10, "exp": math.exp, "ceil": math.ceil, "floor": math.floor}
BINARY: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}
UNARY: dict[type[ast.unaryop], Callable[[float], float]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}


class CalculationError(ValueError):
    """An expression outside the allowed arithmetic, or one without a finite value."""


def calculate(expression: str) -> float:
    """The value of an arithmetic ``expression`` (see the module docstring)."""
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise CalculationError(f"expression of {len(expression)} characters is longer than the "
                               f"{MAX_EXPRESSION_LENGTH} allowed; split it")
    try:
        tree = ast.parse(expression.replace("^", "**"), mode="eval")
    except SyntaxError:
        raise CalculationError(f"{expression!r} is not an arithmetic expression") from None
    try:
        value = _evaluate(tree.body)
    except (ZeroDivisionError, OverflowError, ValueError, TypeError) as exc:
        if isinstance(exc, CalculationError):
            raise
        raise CalculationError(f"{expression!r} has no finite value ({exc})") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise CalculationError(f"{expression!r} has no finite value")
    return float(value)


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise CalculationError(f"exponents are limited to +/-{MAX_EXPONENT}")
        return BINARY[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in UNARY:
        return UNARY[type(node.op)](_evaluate(node.operand))
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS
            and not node.keywords and node.args):
        return FUNCTIONS[node.func.id](*(_evaluate(arg) for arg in node.args))
    allowed = ", ".join(FUNCTIONS)
    raise CalculationError(f"only numbers, + - * / // % ** and the functions {allowed} are allowed; "
                           f"found {type(node).__name__}")
