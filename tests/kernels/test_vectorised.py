"""The XPU plugin's element-wise, cast and reduction loops compile to packed SIMD.

The loops are static functions of libxpu_plugin.so (their addresses sit in the kernels'
dispatch tables, so each keeps its symbol). The test disassembles them with objdump and
looks for packed arithmetic: `addps` works on four floats at once, `addss` on one. A build
with -O2 (GCC 12) or without `restrict` on the loops' pointers has only scalar forms there.
On CPUs with AVX2 the float arithmetic runs in separate 32-byte loops; they give the same
bits as the 16-byte ones and as NumPy.
"""
from __future__ import annotations

import json
import platform
import re
import shutil
import subprocess

import pytest

# loop symbol -> packed mnemonics that do its arithmetic (SSE2 baseline or any AVX form)
PACKED = {
    "add_f32": {"addps"},
    "mul_f64": {"mulpd"},
    "sub_i32": {"psubd"},
    "add_i64": {"paddq"},
    "lt_f32": {"cmpltps", "cmpps", "cmpgtps", "cmpnleps"},
    "neg_f32": {"xorps"},
    "relu_f32": {"andnps"},  # a select (cmpleps, andnps), no branch per element
    "apply_task": {"sqrtps"},  # the optimizers' loops: -fno-math-errno lets sqrtf vectorise
    "square_f64": {"mulpd"},
    "cast_i32_f32": {"cvtdq2ps"},
    "cast_f32_f64": {"cvtps2pd"},
    "sum_f32_run": {"addps"},
    "sum_f64_rows": {"addpd"},
    "add_f32_avx2": {"addps"},
    "mul_f64_avx2": {"mulpd"},
}

INSTRUCTION = re.compile(r"^\s+[0-9a-f]+:\s+(\S+)", re.M)


@pytest.fixture(scope="module")
def disassembly(xpu_platform):
    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip(f"the expected mnemonics are x86-64's, this is {platform.machine()}")
    objdump = shutil.which("objdump")
    if objdump is None:
        pytest.skip("objdump (binutils) is not installed")
    result = subprocess.run([objdump, "-d", "--no-show-raw-insn", xpu_platform.path],
                            capture_output=True, text=True, check=True)
    if "__asan_report" in result.stdout:
        pytest.skip("the plugin is built with AddressSanitizer, whose checks keep loops scalar")
    return result.stdout


def mnemonics(disassembly: str, symbol: str) -> list:
    """The instructions of `symbol`'s body (AVX's leading 'v' dropped)."""
    match = re.search(rf"^[0-9a-f]+ <{re.escape(symbol)}>:\n(.*?)(?:\n\n|\Z)", disassembly,
                      re.S | re.M)
    assert match is not None, f"{symbol} is not in the plugin's symbol table"
    return [m[1:] if m.startswith("v") else m for m in INSTRUCTION.findall(match.group(1))]


@pytest.mark.parametrize("symbol", sorted(PACKED))
def test_loop_has_packed_arithmetic(disassembly, symbol):
    found = mnemonics(disassembly, symbol)
    assert found, f"{symbol} has no instructions"
    packed = PACKED[symbol] & set(found)
    assert packed, f"{symbol} has no packed {sorted(PACKED[symbol])}: only {sorted(set(found))}"


def test_avx2_loops_use_32_byte_vectors(disassembly):
    # The float arithmetic loops chosen on CPUs with AVX2 work on ymm registers; the
    # baseline ones stay in xmm registers, which every x86-64 CPU has.
    body = re.search(r"^[0-9a-f]+ <add_f32_avx2>:\n(.*?)(?:\n\n|\Z)", disassembly, re.S | re.M)
    assert body is not None and "%ymm" in body.group(1)
    baseline = re.search(r"^[0-9a-f]+ <add_f32>:\n(.*?)(?:\n\n|\Z)", disassembly, re.S | re.M)
    assert baseline is not None and "%ymm" not in baseline.group(1)


def test_scalar_helpers_are_told_apart(disassembly):
    # The check reads the right function: a loop over one element at a time, the scalar
    # combiner of a reduction, has scalar forms and none of the packed ones.
    found = set(mnemonics(disassembly, "sum_f32_combine"))
    assert "addss" in found and "addps" not in found


EXACT_OPS = r"""
import json
import numpy as np
import pluggable
from pluggable import raw_ops

rng = np.random.default_rng(5)
special = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e-45, 3e38, -3e38])
results = {}
for dtype in (np.float32, np.float64):
    x = np.concatenate([rng.standard_normal(1003) * 1e3, special, special]).astype(dtype)
    y = np.concatenate([rng.standard_normal(1003), special, special[::-1]]).astype(dtype)
    X, Y = pluggable.tensor(x, device="xpu:0"), pluggable.tensor(y, device="xpu:0")
    with np.errstate(all="ignore"):
        want = {"AddV2": x + y, "Sub": x - y, "Mul": x * y, "RealDiv": x / y,
                "Maximum": np.maximum(x, y), "Minimum": np.minimum(x, y)}
    for op, expected in want.items():
        got = getattr(raw_ops, op)(x=X, y=Y).numpy()
        results[f"{op} {np.dtype(dtype).name}"] = bool(
            np.array_equal(got.view(f"u{got.itemsize}"), expected.view(f"u{got.itemsize}")))
print(json.dumps(results))
"""


@pytest.mark.parametrize("isa", ["generic", "best"])
def test_float_arithmetic_is_bit_exact_in_every_vector_width(run_python, isa):
    # XPU_KERNEL_ISA=generic keeps the 16-byte loops; otherwise this CPU's AVX2 loops run.
    # Both give NumPy's bits, NaN and signed zeros included.
    result = run_python(EXACT_OPS, env={"XPU_KERNEL_ISA": isa if isa != "best" else None})
    exact = json.loads(result.stdout.splitlines()[-1])
    assert exact == dict.fromkeys(exact, True) and len(exact) == 12, exact
