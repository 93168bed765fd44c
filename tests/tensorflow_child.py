"""Asks TensorFlow in a child interpreter: ``in_tensorflow(code)`` runs ``code`` after
``import tensorflow as tf``, with TensorFlow's CPU as its only visible device, and returns the
JSON value its last output line holds.

TensorFlow's libraries export TF_* functions as pluggable's runtime does, so the two never
share the test process (importing both in one segfaults); tests that compare with
TensorFlow skip when it is not installed."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

PRELUDE = """
import json, os
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
os.environ["CUDA_VISIBLE_DEVICES"] = ""
import numpy as np
import tensorflow as tf
# TensorFlow's own CPU: an installed pluggable puts its XPU library in tensorflow-plugins/,
# which TensorFlow loads and would otherwise place ops on.
tf.config.set_visible_devices(tf.config.list_physical_devices("CPU"))
tf.device("/CPU:0").__enter__()
"""


def require_tensorflow() -> None:
    if importlib.util.find_spec("tensorflow") is None:
        pytest.skip("TensorFlow is not installed (pip install 'pluggable[tensorflow]')")


def in_tensorflow(code: str):
    """The JSON value printed last by ``code``, run with TensorFlow imported as ``tf``."""
    require_tensorflow()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run([sys.executable, "-c", PRELUDE + code], capture_output=True,
                            text=True, env=env, timeout=600)
    assert result.returncode == 0, f"TensorFlow failed ({result.returncode}):\n" \
                                   f"{result.stdout[-2000:]}\n{result.stderr[-4000:]}"
    return json.loads(result.stdout.strip().splitlines()[-1])
