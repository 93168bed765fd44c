"""Discovery: site-packages, PLUGGABLE_PLUGIN_PATH, entry points, deduplication and the
switch that turns it off. Each case runs in a fresh interpreter: discovery happens once per
process."""
from __future__ import annotations

import json
import os
import shutil
import textwrap

import pytest

REPORT = textwrap.dedent("""
    import json, warnings
    warnings.simplefilter("always")
    with warnings.catch_warnings(record=True) as caught:
        import pluggable
        records = pluggable.config.list_plugins()
        devices = [d.name for d in pluggable.config.list_physical_devices()]
    print(json.dumps({
        "records": [dict(path=r.path, source=r.source, status=r.status, step=r.step,
                         reason=r.reason, platform=r.platform_name) for r in records],
        "devices": devices,
        "warnings": [(w.category.__name__, str(w.message)) for w in caught],
    }))
""")


def report(run_python, **env):
    result = run_python(REPORT, env=env)
    return json.loads(result.stdout.splitlines()[-1])


@pytest.fixture
def plugin_copy(tmp_path, build_test_plugin):
    """A directory holding a copy of the (unbroken) test plugin."""
    directory = tmp_path / "extra"
    directory.mkdir()
    path = directory / "libtest_dev.so"
    shutil.copy(build_test_plugin(PLATFORM_NAME="PATH_DEV", DEVICE_TYPE="PATHDEV"), path)
    return path


def test_installed_xpu_plugin_is_found_in_site_packages(run_python):
    data = report(run_python, PLUGGABLE_PLUGIN_PATH=None, PLUGGABLE_DISABLE_AUTOLOAD=None)
    xpu = [r for r in data["records"] if r["platform"] == "REF_XPU"]
    assert len(xpu) == 1
    assert xpu[0]["status"] == "loaded"
    assert xpu[0]["path"].endswith(os.path.join("tensorflow-plugins", "libxpu_plugin.so"))
    assert xpu[0]["source"] == "site-packages"
    assert data["devices"][:3] == ["/physical_device:CPU:0", "/physical_device:XPU:0",
                                   "/physical_device:XPU:1"]
    assert data["warnings"] == []


def test_plugin_path_takes_files_and_directories(run_python, plugin_copy, tmp_path,
                                                 build_test_plugin):
    other = build_test_plugin(PLATFORM_NAME="FILE_DEV", DEVICE_TYPE="FILEDEV")
    data = report(run_python,
                  PLUGGABLE_PLUGIN_PATH=os.pathsep.join([str(plugin_copy.parent), other]))
    by_platform = {r["platform"]: r for r in data["records"]}
    assert by_platform["PATH_DEV"]["status"] == "loaded"
    assert by_platform["PATH_DEV"]["source"] == "PLUGGABLE_PLUGIN_PATH"
    assert by_platform["FILE_DEV"]["status"] == "loaded"
    assert "/physical_device:PATHDEV:0" in data["devices"]
    assert "/physical_device:FILEDEV:0" in data["devices"]


def test_a_file_reached_twice_loads_once(run_python, plugin_copy, tmp_path):
    links = tmp_path / "links"
    links.mkdir()
    os.symlink(plugin_copy, links / "libalias.so")
    data = report(run_python, PLUGGABLE_PLUGIN_PATH=os.pathsep.join(
        [str(plugin_copy.parent), str(links), str(plugin_copy)]))
    mine = [r for r in data["records"] if r["platform"] == "PATH_DEV"]
    assert len(mine) == 1
    assert data["warnings"] == []


def test_disable_autoload(run_python, plugin_copy):
    code = textwrap.dedent(f"""
        import pluggable
        assert pluggable.config.list_plugins() == []
        assert [d.device_type for d in pluggable.config.list_physical_devices()] == ["CPU"]
        platform = pluggable.load_plugin({str(plugin_copy)!r})
        assert [d.device_type for d in pluggable.config.list_physical_devices()] == \\
            ["CPU", "PATHDEV"]
        print(platform.name)
    """)
    result = run_python(code, env={"PLUGGABLE_DISABLE_AUTOLOAD": "1",
                                   "PLUGGABLE_PLUGIN_PATH": str(plugin_copy.parent)})
    assert result.stdout.strip() == "PATH_DEV"


def test_entry_points(run_python, plugin_copy, tmp_path):
    site = tmp_path / "site"
    dist = site / "myplugin-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: myplugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[pluggable.plugins]\nmine = myplugin_paths:PATH\nbroken = myplugin_paths:missing\n")
    (site / "myplugin_paths.py").write_text(f"PATH = {str(plugin_copy)!r}\n")
    data = report(run_python, PYTHONPATH=str(site))
    mine = [r for r in data["records"] if r["platform"] == "PATH_DEV"]
    assert len(mine) == 1 and mine[0]["source"].startswith("entry point mine")
    assert len(data["warnings"]) == 1
    category, message = data["warnings"][0]
    assert category == "PluginLoadWarning"
    assert "'broken'" in message and "myplugin_paths:missing" in message


def test_broken_plugin_is_skipped_with_a_warning_and_xpu_still_loads(run_python, tmp_path,
                                                                     build_test_plugin):
    broken = tmp_path / "broken"
    broken.mkdir()
    shutil.copy(build_test_plugin(NULL_SE_CALLBACK="memcpy_htod"), broken / "libbroken.so")
    (broken / "libgarbage.so").write_bytes(b"this is not an ELF file")
    data = report(run_python, PLUGGABLE_PLUGIN_PATH=str(broken))
    by_path = {os.path.basename(r["path"]): r for r in data["records"]}
    assert by_path["libbroken.so"]["status"] == "skipped"
    assert by_path["libbroken.so"]["step"] == "validation"
    # Not an ELF file: refused by the file check before dlopen, saying so.
    assert by_path["libgarbage.so"]["step"] == "file check"
    assert "not an ELF shared library" in by_path["libgarbage.so"]["reason"]
    assert by_path["libxpu_plugin.so"]["status"] == "loaded"
    messages = [m for c, m in data["warnings"] if c == "PluginLoadWarning"]
    assert len(messages) == 2
    broken_message = next(m for m in messages if "libbroken.so" in m)
    assert "validation failed" in broken_message
    assert "SP_StreamExecutor.memcpy_htod is required" in broken_message
    assert "PLUGGABLE_DISABLE_AUTOLOAD=1" in broken_message
    assert "/physical_device:XPU:1" in data["devices"]


def test_discovery_runs_once_under_concurrent_first_use(run_python, plugin_copy):
    code = textwrap.dedent("""
        import threading, pluggable
        barrier = threading.Barrier(8)
        results = []
        def first_use():
            barrier.wait()
            results.append(len(pluggable.config.list_physical_devices()))
        threads = [threading.Thread(target=first_use) for _ in range(8)]
        for t in threads: t.start()
        for t in threads: t.join()
        print(len(set(results)), len(pluggable.config.list_plugins()))
    """)
    result = run_python(code, env={"PLUGGABLE_PLUGIN_PATH": str(plugin_copy.parent)})
    assert result.stdout.split() == ["1", "2"]


def test_an_entry_point_giving_a_relative_path_is_refused(plugin_copy, tmp_path):
    # The plugin sits in the working directory, where a relative path would find it.
    import subprocess
    import sys

    site = tmp_path / "site"
    dist = site / "relplugin-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: relplugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[pluggable.plugins]\nrel = relplugin_paths:path\n")
    (site / "relplugin_paths.py").write_text(
        f"def path():\n    return {plugin_copy.name!r}\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(site), os.environ.get("PYTHONPATH", "")]))
    env.pop("PLUGGABLE_DISABLE_AUTOLOAD", None)
    env.pop("PLUGGABLE_PLUGIN_PATH", None)
    result = subprocess.run([sys.executable, "-c", REPORT], capture_output=True, text=True,
                            env=env, cwd=str(plugin_copy.parent), timeout=120, check=True)
    data = json.loads(result.stdout.splitlines()[-1])
    assert not [r for r in data["records"] if r["platform"] == "PATH_DEV"]
    assert "/physical_device:PATHDEV:0" not in data["devices"]
    (warning,) = [m for c, m in data["warnings"] if c == "PluginLoadWarning"]
    assert "entry point 'rel'" in warning and "relplugin_paths:path" in warning
    assert f"gave the relative path {plugin_copy.name!r}, which is ignored" in warning
    assert "Return an absolute path" in warning


def _link_in(directory, target, mode):
    directory.mkdir()
    os.chmod(directory, mode)
    link = directory / "libvia_link.so"
    os.symlink(target, link)
    return link


def test_a_link_in_a_world_writable_directory_is_refused(run_python, plugin_copy, tmp_path):
    link = _link_in(tmp_path / "open", plugin_copy, 0o777)
    data = report(run_python, PLUGGABLE_PLUGIN_PATH=str(link))
    (record,) = [r for r in data["records"] if r["path"] in (str(link), str(plugin_copy))]
    assert record["status"] == "skipped" and record["step"] == "file check"
    assert record["reason"] == (f"the directory {tmp_path / 'open'} of the link is "
                                f"world-writable without the sticky bit; anyone could replace "
                                f"the link (chmod o-w the directory)")
    # What the warning says is what the record says; the plugin's own file is fine.
    (warning,) = [m for c, m in data["warnings"] if c == "PluginLoadWarning"]
    assert record["reason"] in warning
    loaded = report(run_python, PLUGGABLE_PLUGIN_PATH=str(plugin_copy))
    assert [r["status"] for r in loaded["records"] if r["platform"] == "PATH_DEV"] == ["loaded"]


def test_a_link_in_a_sticky_directory_of_ones_own_loads(run_python, plugin_copy, tmp_path):
    # As /tmp: anyone may write there, but only the link's owner (this user) may replace it.
    link = _link_in(tmp_path / "sticky", plugin_copy, 0o1777)
    data = report(run_python, PLUGGABLE_PLUGIN_PATH=str(link))
    assert [r["status"] for r in data["records"] if r["platform"] == "PATH_DEV"] == ["loaded"]
    assert data["warnings"] == []


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a link to another user")
def test_a_link_of_another_user_in_a_sticky_directory_is_refused(run_python, plugin_copy,
                                                                 tmp_path):
    link = _link_in(tmp_path / "sticky", plugin_copy, 0o1777)
    os.lchown(link, 65534, 65534)
    data = report(run_python, PLUGGABLE_PLUGIN_PATH=str(link))
    (record,) = [r for r in data["records"] if r["path"] in (str(link), str(plugin_copy))]
    assert record["status"] == "skipped" and record["step"] == "file check"
    assert record["reason"].startswith(f"the link {link} belongs to user 65534, neither you")
