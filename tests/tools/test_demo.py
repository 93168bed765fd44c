"""`python -m pluggable demo`: the same network on every device, results that agree, a
timing table; and `import pluggable` does not pay for the demo's progress bar."""
import subprocess
import sys


def test_demo_runs_on_every_device_and_agrees(tmp_path):
    result = subprocess.run([sys.executable, "-m", "pluggable", "demo", "--profile-dir",
                             str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    for device in ("/physical_device:CPU:0", "/physical_device:XPU:0", "/physical_device:XPU:1"):
        assert device in out
    rows = [line.split() for line in out.splitlines() if line.startswith("/device:")]
    assert [r[0] for r in rows] == ["/device:CPU:0", "/device:XPU:0", "/device:XPU:1"]
    for row in rows:
        median_ms, min_ms, gflops = (float(v) for v in row[1:4])
        assert 0 < min_ms <= median_ms and gflops > 0
        assert row[4] == "yes"
    assert "Every device agrees with the CPU." in out
    saved = list(tmp_path.glob("plugins/profile/*/*.xplane.pb"))
    assert len(saved) == 1 and f"A profile of one run per device: {saved[0]}" in out
    trace = saved[0].parent / "trace.json.gz"
    assert trace.stat().st_size > 0 and f"Its Perfetto trace: {trace}" in out
    assert f"python -m pluggable profile-summary {tmp_path}" in out
    assert f"pip install xprof; xprof --logdir {tmp_path} --port 6006" in out


def test_demo_saves_under_the_current_folder_by_default(tmp_path):
    import os

    import pluggable  # run from another folder: the child imports this same package

    source = os.path.dirname(os.path.dirname(os.path.abspath(pluggable.__file__)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (source, os.environ.get("PYTHONPATH")) if p)}
    result = subprocess.run([sys.executable, "-m", "pluggable", "demo"], cwd=tmp_path,
                            env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    saved = list((tmp_path / "logs").glob("plugins/profile/*/*.xplane.pb"))
    assert len(saved) == 1 and str(saved[0]) in result.stdout


def test_import_does_not_load_the_demo_or_tqdm():
    code = ("import sys, pluggable; pluggable.config.list_physical_devices(); "
            "print(sorted(m for m in ('tqdm', 'pluggable.tools.demo', 'pytest') "
            "if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "[]", result.stderr
