"""Plugins' log lines (``tensorflow/c/logging.h``: TF_Log, TF_VLog) in Python's `logging`.

The runtime library queues each line with the file name of the library that wrote it; a
thread of this module waits for lines without the GIL and logs each to the logger
``pluggable.plugin`` at the matching level (TF_INFO: INFO, TF_WARNING: WARNING, TF_ERROR:
ERROR, TF_VLog: DEBUG when ``TF_CPP_MAX_VLOG_LEVEL`` allows it). The plugin's own thread never
waits for Python. The thread starts with the first loaded library that logs.
"""
from __future__ import annotations

import ctypes
import os
import threading

from . import native
from .limits import safe_text

LOGGER_NAME = "pluggable.plugin"
#: The functions of tensorflow/c/logging.h.
LOGGING_FUNCTIONS = ("TF_Log", "TF_VLog", "TF_DVLog")
_LINE = 2048

_fns = native.bind(native.lib, {
    # int (int* level, char* text, size_t capacity, int timeout_ms)
    "pluggable_WaitLogRecord": (ctypes.c_int, (ctypes.POINTER(ctypes.c_int), ctypes.c_char_p,
                                               ctypes.c_size_t, ctypes.c_int)),
    "pluggable_LogRecordsDropped": (ctypes.c_ulonglong, ()),  # unsigned long long (void)
})
_wait = _fns["pluggable_WaitLogRecord"]
dropped = _fns["pluggable_LogRecordsDropped"]

_lock = threading.Lock()
_thread = None


def start() -> None:
    """Starts the thread that logs plugins' lines (once per process; again in a forked
    child, where threads do not survive)."""
    global _thread
    with _lock:
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_pump, name="pluggable plugin log", daemon=True)
            _thread.start()


def _pump() -> None:
    import logging

    logger = logging.getLogger(LOGGER_NAME)
    level = ctypes.c_int()
    text = ctypes.create_string_buffer(_LINE)
    while True:
        if _wait(ctypes.byref(level), text, _LINE, 1000):
            logger.log(level.value, "%s", safe_text(text.value.decode("utf-8", "replace")))


def _after_fork() -> None:
    global _thread
    if _thread is not None:
        _thread = None
        start()


os.register_at_fork(after_in_child=_after_fork)
