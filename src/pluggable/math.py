"""``pluggable.math``: the functions of `pluggable.ops` that TensorFlow has in ``tf.math``,
under those names and with those parameters (``math.reduce_sum(input_tensor, axis=None,
keepdims=False)``, ``math.add(x, y)``, ``math.is_nan(x)``, ...). They are the same functions
as ``pluggable.ops.<name>``."""
from __future__ import annotations

from .ops import (abs, acos, acosh, add, add_n, argmax, argmin, asin, asinh, atan, atan2,  # noqa: A004
                  atanh, ceil, cos, cosh, cumprod, cumsum, divide, divide_no_nan, equal, erf,
                  exp, expm1, floor, floordiv, floormod, greater, greater_equal, is_finite,
                  is_inf, is_nan, less, less_equal, log, log1p, log_softmax, logical_and,
                  logical_not, logical_or, logical_xor, maximum, minimum, mod, multiply,
                  negative, not_equal, pow, reciprocal, reduce_all, reduce_any, reduce_max,
                  reduce_mean, reduce_min, reduce_prod, reduce_sum, rint, round, rsqrt,
                  sigmoid, sign, sin, sinh, softmax, softplus, softsign, sqrt, square,
                  squared_difference, subtract, tan, tanh, truediv, xdivy)

__all__ = ["abs", "acos", "acosh", "add", "add_n", "argmax", "argmin", "asin", "asinh", "atan",
           "atan2", "atanh", "ceil", "cos", "cosh", "cumprod", "cumsum", "divide",
           "divide_no_nan", "equal", "erf", "exp", "expm1", "floor", "floordiv", "floormod",
           "greater", "greater_equal", "is_finite", "is_inf", "is_nan", "less", "less_equal",
           "log", "log1p", "log_softmax", "logical_and", "logical_not", "logical_or",
           "logical_xor", "maximum", "minimum", "mod", "multiply", "negative", "not_equal",
           "pow", "reciprocal", "reduce_all", "reduce_any", "reduce_max", "reduce_mean",
           "reduce_min", "reduce_prod", "reduce_sum", "rint", "round", "rsqrt", "sigmoid",
           "sign", "sin", "sinh", "softmax", "softplus", "softsign", "sqrt", "square",
           "squared_difference", "subtract", "tan", "tanh", "truediv", "xdivy"]
