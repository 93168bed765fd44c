"""TensorFlow 2.21's signatures recorded in tests/data/tf_raw_ops_signatures.json (by
tests/data/record_tf_signatures.py), and ours in the same form, for the signature tests."""
from __future__ import annotations

import inspect
import json
import os

RECORDED = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data",
                        "tf_raw_ops_signatures.json")
with open(RECORDED, encoding="utf-8") as f:
    TF = json.load(f)


def parameters(function):
    """``function``'s parameters as the record spells TensorFlow's: name, and "required",
    a "dtype" name or a "value" for the default. The keyword-only ``device`` pluggable's
    creation functions add is left out."""
    out = []
    for p in inspect.signature(function).parameters.values():
        if p.kind is p.KEYWORD_ONLY and p.name == "device":
            continue
        if p.default is p.empty:
            out.append({"name": p.name, "required": True})
        elif hasattr(p.default, "numpy_dtype"):
            out.append({"name": p.name, "dtype": p.default.name})
        else:
            out.append({"name": p.name, "value": p.default})
    return out
