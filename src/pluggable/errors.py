"""The exceptions and warnings of pluggable: one base class, `PluggableError`, and a subclass
per ``TF_Code`` that also derives from the builtin a Python user reaches for first.

They are defined in `pluggable.base.errors`, on the floor that every other floor imports;
this module is their public name.
"""
from .base.errors import *  # noqa: F401,F403
from .base.errors import __all__  # noqa: F401
