"""Every example runs and says what it should; the plugin template builds, installs into a
fresh virtual environment and is found there by discovery."""
from __future__ import annotations

import os
import subprocess
import sys
import venv

import pytest

import pluggable

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(REPO, "examples")
TEMPLATE = os.path.join(EXAMPLES, "plugin_template")


def run_example(name: str) -> str:
    result = subprocess.run([sys.executable, os.path.join(EXAMPLES, name)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{name} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def test_quickstart_lists_devices_and_agrees_across_them():
    out = run_example("quickstart.py")
    assert "/physical_device:XPU:0" in out and "/physical_device:XPU:1" in out
    lines = [line for line in out.splitlines() if line.startswith("relu(x @ w) on")]
    assert [line.split(":", 1)[0] for line in lines] == [
        "relu(x @ w) on /device", "relu(x @ w) on /device", "relu(x @ w) on /device"]
    assert {line.split(": ", 1)[1] for line in lines} == {lines[0].split(": ", 1)[1]}
    assert "XPU:0 memory in use:" in out


def test_streams_and_events_orders_work_across_streams():
    out = run_example("streams_and_events.py")
    assert "downloads done" in out
    assert "uploaded 4194304 bytes in 4 chunks" in out


def loss_table(out: str):
    """The (XPU, CPU) loss columns of a training example's per-epoch table."""
    rows = [line.split() for line in out.splitlines() if line.strip()[:1].isdigit()]
    return [float(r[1]) for r in rows], [float(r[2]) for r in rows]


def test_mlp_training_learns_the_same_on_xpu_and_cpu():
    out = run_example("mlp_training.py")
    xpu, cpu = loss_table(out)
    assert len(xpu) == 10
    assert xpu == pytest.approx(cpu, rel=1e-4)
    assert xpu[-1] < xpu[5] < xpu[0]  # last-batch losses: falling, not every epoch
    assert xpu[-1] < 0.75 * xpu[0]
    assert "ms per step" in out


def test_mlp_training_uses_the_tape_and_an_optimizer():
    source = open(os.path.join(EXAMPLES, "mlp_training.py")).read()
    assert "pluggable.GradientTape()" in source and "optimizers.SGD(" in source
    assert "tape.gradient(" in source and "apply_gradients(" in source


def test_cnn_training_learns_the_same_on_xpu_and_cpu():
    out = run_example("cnn_training.py")
    xpu, cpu = loss_table(out)
    assert len(xpu) == 8
    assert xpu == pytest.approx(cpu, rel=1e-4)
    assert all(later < earlier for earlier, later in zip(xpu, xpu[1:]))  # every epoch
    assert xpu[-1] < 0.5 * xpu[0]
    assert "/xpu:0:" in out and "ms per step" in out


def test_cnn_training_losses_do_not_depend_on_the_xpu_streams_speed():
    """Slow streams (every XPU operation waits 500 us on its worker) give the same losses:
    the reads of the weights, the gradients and the updates are ordered on the stream."""
    def losses(env):
        result = subprocess.run([sys.executable, os.path.join(EXAMPLES, "cnn_training.py")],
                                capture_output=True, text=True, timeout=300,
                                env={**os.environ, **env})
        assert result.returncode == 0, result.stdout + result.stderr
        xpu, _ = loss_table(result.stdout)
        final = [line for line in result.stdout.splitlines() if line.startswith("/xpu:0:")]
        return xpu, final[0].rsplit("final loss", 1)[1]

    fast = losses({"XPU_STREAM_DELAY_US": "0"})
    slow = losses({"XPU_STREAM_DELAY_US": "500"})
    assert len(slow[0]) == 8
    assert slow == fast


def test_template_compiles_warning_free_against_our_headers(tmp_path):
    out = tmp_path / "libmy_device_plugin.so"
    subprocess.run([os.environ.get("CC", "cc"), "-std=c11", "-Wall", "-Wextra", "-Werror",
                    "-O1", "-fPIC", "-shared", "-I", pluggable.get_include(), "-o", str(out),
                    os.path.join(TEMPLATE, "my_device_plugin.c")], check=True)
    assert out.stat().st_size > 0


@pytest.mark.skipif(not os.environ.get("PLUGGABLE_TF_INCLUDE"),
                    reason="set PLUGGABLE_TF_INCLUDE to TensorFlow's include directory")
def test_template_compiles_against_tensorflow_headers(tmp_path):
    out = tmp_path / "libmy_device_plugin.so"
    subprocess.run([os.environ.get("CC", "cc"), "-std=c11", "-Wall", "-Wextra", "-Werror",
                    "-O1", "-fPIC", "-shared", "-I", os.environ["PLUGGABLE_TF_INCLUDE"],
                    "-o", str(out), os.path.join(TEMPLATE, "my_device_plugin.c")], check=True)


def test_template_device_runs_its_kernel(tmp_path):
    """Loaded by hand in a fresh process: the device appears and AddV2 runs there."""
    out = tmp_path / "libmy_device_plugin.so"
    subprocess.run([os.environ.get("CC", "cc"), "-std=c11", "-O1", "-fPIC", "-shared", "-I",
                    pluggable.get_include(), "-o", str(out),
                    os.path.join(TEMPLATE, "my_device_plugin.c")], check=True)
    script = f"""
import numpy as np, pluggable
from pluggable import ops
pluggable.load_plugin({str(out)!r})
x = pluggable.tensor(np.arange(4, dtype=np.float32), device="/my_device:0")
y = ops.add(x, x)
print(y.device, y.numpy().tolist())
print(pluggable.config.get_device_details("MY_DEVICE:0")["device_name"])
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "/device:MY_DEVICE:0 [0.0, 2.0, 4.0, 6.0]"
    assert lines[1] == "my device (template)"


def test_template_installs_into_a_fresh_venv(tmp_path):
    """`pip install .` of the project, then of the template: discovery finds the template's
    library through site-packages/tensorflow-plugins and its entry point, as one plugin."""
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = str(env_dir / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PLUGGABLE_"))}

    def pip(*args):
        result = subprocess.run([python, "-m", "pip", "install", "--quiet", *args],
                                capture_output=True, text=True, env=env, timeout=900)
        assert result.returncode == 0, f"pip install {' '.join(args)}:\n{result.stderr}"

    pip("setuptools>=64", "wheel")
    pip(REPO)
    pip("--no-build-isolation", TEMPLATE)
    result = subprocess.run([python, "-m", "pluggable", "devices"], capture_output=True,
                            text=True, env=env, timeout=120, cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "MY_DEVICE:0" in result.stdout and "XPU:0" in result.stdout
    result = subprocess.run([python, "-m", "pluggable", "plugins"], capture_output=True,
                            text=True, env=env, timeout=120, cwd=str(tmp_path))
    assert result.stdout.count("libmy_device_plugin.so") == 1, result.stdout


def test_the_xpu_readme_build_command_works_in_a_fresh_checkout(tmp_path):
    """The command in plugins/xpu/README.md, run as written from the root of a checkout that
    has no build/ directory yet."""
    import re
    import shutil

    readme = open(os.path.join(REPO, "plugins", "xpu", "README.md")).read()
    block = re.search(r"From the repository root:\n\n((?:    .*\n)+)", readme).group(1)
    command = " ".join(line.strip().rstrip("\\") for line in block.splitlines())
    shutil.copytree(os.path.join(REPO, "include"), tmp_path / "include")
    shutil.copytree(os.path.join(REPO, "plugins", "xpu"), tmp_path / "plugins" / "xpu")
    result = subprocess.run(command, shell=True, cwd=str(tmp_path), capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "build" / "libxpu_plugin.so").stat().st_size > 0


def test_profile_model_writes_a_profile_for_every_viewer(tmp_path):
    result = subprocess.run([sys.executable, os.path.join(EXAMPLES, "profile_model.py"),
                             str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert ("planes: /device:GPU:0 (/device:XPU:0), /device:GPU:1 (/device:XPU:1), "
            "/host:CPU") in out
    saved = [p for p in tmp_path.glob("plugins/profile/*/*.xplane.pb")]
    assert len(saved) == 1 and f"saved: {saved[0]}" in out
    assert (saved[0].parent / "trace.json.gz").stat().st_size > 0
    rows = [line.split() for line in out.splitlines() if line.startswith("/device:XPU:")]
    assert {(r[0], r[1]) for r in rows} >= {("/device:XPU:0", "MatMul"),
                                            ("/device:XPU:1", "MatMul")}
    assert all(r[2] == "6" for r in rows if r[1] == "MatMul")


def test_dlpack_interop_shares_memory_and_copies_device_tensors():
    out = run_example("dlpack_interop.py")
    assert "at the tensor's own address: True" in out
    assert "a strided NumPy view as a tensor: [[0.0, 2.0], [4.0, 6.0], [8.0, 10.0]]" in out
    assert "summed on the XPU: 30.0" in out
    assert "copied to the host: [3.0, 3.0, 3.0, 3.0]" in out
