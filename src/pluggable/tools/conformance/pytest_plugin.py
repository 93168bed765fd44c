"""The conformance suite as a pytest plugin: `pytest --pluggable-plugin PATH.so` runs the
checks of `checks.py` against that library (besides any tests named on the command line).
Without the option this plugin does nothing."""
from __future__ import annotations

import os

OPTION = "--pluggable-plugin"


def pytest_addoption(parser):
    parser.addoption(OPTION, action="store", default=None, metavar="PATH.so",
                     help="run pluggable's conformance checks against this plugin library")


def pytest_configure(config):
    path = config.getoption("pluggable_plugin")
    if not path:
        return
    if not os.path.isfile(path):
        import pytest

        raise pytest.UsageError(f"{OPTION}: no such file: {path!r}; name the plugin's shared "
                                f"library (a .so file)")
    # Only the plugin under test is loaded: discovery would add whatever is installed.
    os.environ["PLUGGABLE_DISABLE_AUTOLOAD"] = "1"
    from . import CHECKS

    if CHECKS not in config.args:
        config.args.append(CHECKS)
