"""TensorFlow and pluggable both export TensorFlow's C API to the dynamic loader, so they
cannot share a process (without the guard, `import pluggable; import tensorflow` ends in a
segmentation fault). Either order of imports is refused with an ImportError that says why
and what to do; code that treats TensorFlow as optional goes on without it."""
from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

if importlib.util.find_spec("tensorflow") is None:
    pytest.skip("TensorFlow is not installed (pip install 'pluggable[tensorflow]')",
                allow_module_level=True)


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)


def test_tensorflow_after_pluggable_is_refused_not_a_crash():
    result = _run("import pluggable\n"
                  "try:\n"
                  "    import tensorflow\n"
                  "except ImportError as e:\n"
                  "    print(type(e).__name__, e)\n"
                  "import numpy as np\n"
                  "with pluggable.device('/xpu:0'):\n"
                  "    print(pluggable.ops.add(np.ones(2, np.float32), 1.0).numpy().tolist())\n")
    assert result.returncode == 0, result.stderr[-2000:]
    first, second = result.stdout.splitlines()[:2]
    assert first.startswith("TensorFlowInTheProcessError import tensorflow after pluggable: ")
    assert "Run TensorFlow in another process" in first
    assert second == "[2.0, 2.0]"  # pluggable goes on working


def test_pluggable_after_tensorflow_is_refused():
    result = _run("import tensorflow\nimport pluggable\n")
    assert result.returncode == 1
    assert "TensorFlowInTheProcessError: import pluggable after tensorflow: pluggable and " \
           "TensorFlow cannot share a process" in result.stderr


def test_finding_tensorflow_still_answers_and_optional_imports_go_on():
    result = _run("import importlib.util, pluggable\n"
                  "print(importlib.util.find_spec('tensorflow') is not None)\n"
                  "try:\n"
                  "    import tensorflow as tf\n"
                  "except ImportError:\n"
                  "    tf = None\n"
                  "print(tf)\n")
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["True", "None"]
