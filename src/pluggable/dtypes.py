"""Element types of tensors: TensorFlow's names and ``TF_DataType`` codes, NumPy's dtypes.

They are defined in `pluggable.base.dtypes`, below every floor that makes tensors; this
module is their public name.
"""
from .base.dtypes import *  # noqa: F401,F403
from .base.dtypes import __all__, as_dtype, from_code, resource  # noqa: F401
