"""Text a plugin hands the host (status messages, kernel failures, names in a profile) reaches
the user escaped and bounded, wherever it surfaces: `limits.safe_text` is the one place that
does it."""
from __future__ import annotations

import json
import os

import pytest

from pluggable.base.limits import MAX_MESSAGE_CHARS, safe_text

HERE = os.path.dirname(os.path.abspath(__file__))
HOSTILE_SOURCE = os.path.join(HERE, "..", "plugins", "hostile_plugin.c")
EVIL = "\x1b[2J\x1b]0;pwned\x07kernel\rforged\nline "


def _raw_controls(text: str) -> list:
    return [c for c in text if ord(c) < 32 or 127 <= ord(c) < 160 or c in "\u2028\u202e"]


def test_safe_text_escapes_controls_separators_and_bidi_and_cuts():
    assert safe_text("plain text, ünïcode ok") == "plain text, ünïcode ok"
    assert safe_text("a\x1b[31mb\r\nc\td\x7f\x85") == "a\\x1b[31mb\\r\\nc\\td\\x7f\\x85"
    # A line separator ends a line in some terminals; a bidi override reorders what follows.
    assert safe_text("x\u2028y\u202ez\u2066") == "x\\u2028y\\u202ez\\u2066"
    cut = safe_text("M" * 5000, 100)
    assert cut == "M" * 100 + "... [cut: 5000 in all, 100 shown]"
    assert safe_text("M" * 10, total=12) == "M" * 10 + "... [cut: 12 in all, 10 shown]"


def test_a_kernels_failure_message_is_escaped_and_bounded(run_python, build_test_plugin):
    path = build_test_plugin(HOSTILE_SOURCE, HOSTILE_ESCAPE_KERNEL_MESSAGE=True,
                             PLATFORM_NAME="ESCAPE_KERNEL", DEVICE_TYPE="ESCKERNEL")
    # Twice: the first call takes the slow path, the second the compiled plan's.
    result = run_python(f"""
import json
import numpy as np
import pluggable
from pluggable import raw_ops
pluggable.load_plugin({path!r}, isolate=False)
out = []
for _ in range(2):
    try:
        with pluggable.device("/device:ESCKERNEL:0"):
            raw_ops.Neg(x=np.array([1.0, 2.0], np.float32))
    except pluggable.errors.InternalError as exc:
        out.append([str(exc), exc.plugin_message])
print(json.dumps(out))
""", env={"PLUGGABLE_DISABLE_AUTOLOAD": "1"})
    errors = json.loads(result.stdout.strip().splitlines()[-1])
    assert len(errors) == 2
    for message, plugin_message in errors:
        assert "kernel HostileNeg for Neg failed: \\x1b[2J\\x1b]0;pwned\\x07kernel\\rforged" \
               "\\nline " in message
        assert _raw_controls(message) == [] and _raw_controls(plugin_message) == []
        assert len(message) < MAX_MESSAGE_CHARS + 400


def test_doctor_shows_a_plugins_message_escaped(run_python, build_test_plugin):
    path = build_test_plugin(HOSTILE_SOURCE, HOSTILE_ESCAPE_MESSAGE=True,
                             PLATFORM_NAME="ESCAPE_DOCTOR", DEVICE_TYPE="ESCDOCTOR")
    result = run_python(None, args=("-m", "pluggable", "doctor", path),
                        env={"PLUGGABLE_DISABLE_AUTOLOAD": "1"}, check=False)
    assert result.returncode == 1
    assert "\\x1b[31mred alert\\x1b[0m\\r\\nforged line\\x07" in result.stdout
    assert _raw_controls(result.stdout.replace("\n", "")) == []
    assert not any(line.startswith("forged line") for line in result.stdout.splitlines())


def test_names_in_a_profile_summary_are_escaped():
    pytest.importorskip("google.protobuf")
    from pluggable.profiler.result import ProfileResult
    from pluggable.profiler.xspace import pb2

    space = pb2().XSpace()
    plane = space.planes.add(id=1, name="/device:EVIL:0\x1b[2J")
    plane.event_metadata[1].id = 1
    plane.event_metadata[1].name = "Op\r\nforged row\x1b]0;pwned\x07"
    line = plane.lines.add(id=1, name="stream\n", timestamp_ns=1000)
    line.events.add(metadata_id=1, offset_ps=0, duration_ps=5_000_000)
    summary = ProfileResult(space.SerializeToString()).summary()
    assert "/device:EVIL:0\\x1b[2J" in summary
    assert "Op\\r\\nforged row\\x1b]0;pwned\\x07" in summary
    assert _raw_controls(summary.replace("\n", "")) == []
    assert len(summary.splitlines()) == 3  # the header, its rule, one row


@pytest.mark.parametrize("name", ["Op\x1b[31m", "Op\n" + "x" * 5000])
def test_a_kernel_registrations_names_are_shown_escaped(name):
    from pluggable.kernels.registry import _text

    shown = _text(name.encode())
    assert _raw_controls(shown) == [] and len(shown) < MAX_MESSAGE_CHARS + 100
    assert _text(b"Neg") == "Neg"  # ordinary names are left alone


def test_every_load_failure_reason_is_escaped_once_for_every_route(private_manager):
    # A reason may quote the dynamic loader (a library name from the plugin's file), a status
    # message or the probe child's output; the manager escapes it whatever the step.
    import warnings

    import pluggable
    from pluggable.loader.plugin_manager import PluginRecord

    record = PluginRecord(path="/nowhere/libx.so", source="test")
    with pytest.raises(pluggable.PluginLoadError) as caught:
        private_manager._fail(record, None, "dlopen", "lib\x1b[31mevil.so\r\n: not found",
                              explicit=True)
    assert caught.value.reason == "lib\\x1b[31mevil.so\\r\\n: not found"
    assert "\x1b" not in str(caught.value) and record.reason == caught.value.reason
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        private_manager._fail(PluginRecord(path="/nowhere/liby.so", source="test"), None,
                              "dlopen", "\u202egnp.so", explicit=False)
    (warning,) = seen
    assert "\\u202egnp.so" in str(warning.message) and "\u202e" not in str(warning.message)
