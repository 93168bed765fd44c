"""A plugin's log lines (tensorflow/c/logging.h) reach Python's logging, logger
"pluggable.plugin", with the level TensorFlow gives them and the plugin's file name, from
any of the plugin's threads; TF_VLog follows TF_CPP_MAX_VLOG_LEVEL, TF_DVLog writes nothing
(as in TensorFlow's release builds), and TF_FATAL ends the process as TensorFlow does, which
the probe turns into an error on `load_plugin`'s default route."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pluggable.errors import PluginLoadError

SHOW = r"""
import logging, sys, time, pluggable
lines = []
class Keep(logging.Handler):
    def emit(self, record):
        lines.append(f"{record.name} {record.levelname} {record.getMessage()}")
logger = logging.getLogger("pluggable.plugin")
logger.addHandler(Keep())
logger.setLevel(logging.DEBUG)
pluggable.load_plugin(sys.argv[1], isolate=False)
deadline = time.monotonic() + 10
while len(lines) < 4 and time.monotonic() < deadline:
    time.sleep(0.01)
time.sleep(0.1)
print("\n".join(lines))
"""


def test_every_level_reaches_pythons_logging(build_test_plugin):
    path = build_test_plugin(LOGS=True)
    name = os.path.basename(path)
    result = subprocess.run([sys.executable, "-c", SHOW, path], capture_output=True,
                            text=True, timeout=60,
                            env={**os.environ, "PLUGGABLE_DISABLE_AUTOLOAD": "1",
                                 "TF_CPP_MAX_VLOG_LEVEL": "1"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"pluggable.plugin INFO {name}: initialising 1 platform",
        f"pluggable.plugin WARNING {name}: a warning with a value",
        f"pluggable.plugin DEBUG {name}: verbose at level 1",
        f"pluggable.plugin ERROR {name}: from a thread of its own: ok"]


def test_verbose_lines_are_off_by_default(build_test_plugin):
    path = build_test_plugin(LOGS=True)
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MAX_VLOG_LEVEL"}
    result = subprocess.run([sys.executable, "-c", SHOW, path], capture_output=True,
                            text=True, timeout=60,
                            env={**env, "PLUGGABLE_DISABLE_AUTOLOAD": "1"})
    assert result.returncode == 0, result.stderr
    levels = [line.split()[1] for line in result.stdout.splitlines()]
    assert levels == ["INFO", "WARNING", "ERROR"]


def test_a_fatal_line_ends_the_process_as_in_tensorflow(build_test_plugin, private_manager):
    path = build_test_plugin(LOGS_FATAL=True)
    code = "import pluggable, sys; pluggable.load_plugin(sys.argv[1], isolate=False)"
    died = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PLUGGABLE_DISABLE_AUTOLOAD": "1"})
    assert died.returncode == -6  # abort(), after the line
    assert ("pluggable: a plugin logged a fatal error, which ends the process "
            f"(TF_Log(TF_FATAL), as in TensorFlow): {os.path.basename(path)}: cannot go on: "
            "no hardware") in died.stderr
    with pytest.raises(PluginLoadError) as contained:  # the default route: the probe's child
        private_manager.load_plugin(path)
    assert contained.value.step == "init" and "SIGABRT" in contained.value.reason
