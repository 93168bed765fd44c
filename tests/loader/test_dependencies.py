"""A plugin's dependency tree, read before it runs: every missing library and C API function
named at once, TensorFlow's own libraries recognised and refused, the probe's cached verdicts
following the loader's environment and the dependencies' files, and a crash in an
initialiser contained on the default route of `load_plugin`."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pluggable.errors import PluginLoadError
from pluggable.plugin import dependencies, probe

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIBRARY_SOURCE = os.path.join(HERE, "plugins", "linked_library.c")
PLUGIN_SOURCE = os.path.join(HERE, "plugins", "test_plugin.c")
FLAGS = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-O1", "-fPIC", "-shared",
         *os.environ.get("PLUGGABLE_TEST_CFLAGS", "").split()]


def cc(out, source, *extra, defines=()):
    import pluggable

    cmd = [os.environ.get("CC", "cc"), *FLAGS, "-I", pluggable.get_include(),
           *(f"-D{d}" for d in defines), "-o", str(out), source, *extra]
    result = subprocess.run(cmd, capture_output=True, text=True)
    assert result.returncode == 0, f"{' '.join(cmd)}:\n{result.stderr}"
    return str(out)


def needing(folder, *names):
    """Link flags that record each of ``names`` as DT_NEEDED (all in ``folder``), looked up
    through $ORIGIN."""
    return ["-L", str(folder), "-Wl,--no-as-needed", *(f"-l:{n}" for n in names),
            "-Wl,--enable-new-dtags,-rpath,$ORIGIN"]


@pytest.fixture
def tree_with_holes(tmp_path):
    """libtop.so (a working plugin) -> libmid.so -> libleaf.so, which calls two C API
    functions no host provides; libgone1.so (needed by libmid.so), libgone2.so and
    libgone3.so (needed by libtop.so) exist at link time only."""
    for name in ("libgone1.so", "libgone2.so", "libgone3.so"):
        cc(tmp_path / name, LIBRARY_SOURCE)
    cc(tmp_path / "libleaf.so", LIBRARY_SOURCE, defines=["USES_MISSING_API"])
    cc(tmp_path / "libmid.so", LIBRARY_SOURCE, *needing(tmp_path, "libleaf.so", "libgone1.so"))
    top = cc(tmp_path / "libtop.so", PLUGIN_SOURCE,
             *needing(tmp_path, "libmid.so", "libgone2.so", "libgone3.so"))
    for name in ("libgone1.so", "libgone2.so", "libgone3.so"):
        os.remove(tmp_path / name)
    return top


def test_the_tree_is_resolved_as_the_loader_would(tree_with_holes, tmp_path):
    tree = dependencies.Tree(tree_with_holes)
    found = {lib.name: lib.path for lib in tree.libraries[1:]}
    assert found["libmid.so"] == str(tmp_path / "libmid.so")
    assert found["libleaf.so"] == str(tmp_path / "libleaf.so")  # two levels down
    assert found["libc.so.6"] is not None and os.path.isfile(found["libc.so.6"])
    assert [(lib.name, os.path.basename(lib.needed_by)) for lib in tree.missing] == [
        ("libgone2.so", "libtop.so"), ("libgone3.so", "libtop.so"),
        ("libgone1.so", "libmid.so")]
    from pluggable.base import native

    missing = {name: users for name, users in tree.missing_symbols(()).items()
               if not hasattr(native.lib, name)}
    assert missing == {"TFE_NewOp": ["libleaf.so"], "TF_NotAFunction": ["libleaf.so"]}
    assert tree.tensorflow == []


def test_every_missing_library_is_named_on_every_route(tree_with_holes, private_manager):
    expected = ("3 of the libraries it needs are missing: libgone2.so (needed by libtop.so), "
                "libgone3.so (needed by libtop.so), libgone1.so (needed by libmid.so). Install "
                "them or add their folders to LD_LIBRARY_PATH")
    with pytest.raises(PluginLoadError) as direct:
        private_manager.load_plugin(tree_with_holes, isolate=False)
    assert direct.value.step == "dlopen" and expected in direct.value.reason
    assert "libgone2.so: cannot open shared object file" in direct.value.reason
    with pytest.raises(PluginLoadError) as probed:  # the default route: the probe's child
        private_manager.load_plugin(tree_with_holes)
    assert probed.value.step == "dlopen" and expected in probed.value.reason
    result = probe.doctor(tree_with_holes)
    assert not result.ok and result.step == "dlopen" and expected in result.reason
    report = probe.format_report(result)
    assert ("missing: libgone2.so (needed by libtop.so), libgone3.so (needed by libtop.so), "
            "libgone1.so (needed by libmid.so)") in report
    assert ("missing  TFE_NewOp (used by libleaf.so), TF_NotAFunction (used by libleaf.so)"
            in report)


def test_a_plugin_linking_tensorflow_is_refused_with_the_reason(tmp_path, private_manager):
    stand_in = cc(tmp_path / "libtensorflow_framework.so.2", LIBRARY_SOURCE,
                  "-Wl,-soname,libtensorflow_framework.so.2")
    assert os.path.isfile(stand_in)
    plugin = cc(tmp_path / "libtfplugin.so", PLUGIN_SOURCE,
                *needing(tmp_path, "libtensorflow_framework.so.2"))
    reasons = []
    for isolate in (False, None):
        with pytest.raises(PluginLoadError) as refused:
            private_manager.load_plugin(plugin, isolate=isolate)
        assert refused.value.step == "dependencies"
        reasons.append(refused.value.reason)
    doctor = probe.doctor(plugin)
    assert not doctor.ok and doctor.step == "dependencies"
    reasons.append(doctor.reason)
    assert len(set(reasons)) == 1
    assert reasons[0].startswith("it links libtensorflow_framework.so.2 (TensorFlow 2.x). ")
    assert "two implementations in one process" in reasons[0]
    assert "rebuild it against pluggable.get_include() without linking TensorFlow" in reasons[0]
    assert "links    TensorFlow: it links libtensorflow_framework.so.2" in \
        probe.format_report(doctor)


def test_the_tensorflow_a_plugin_was_built_for_comes_from_its_wheel(tmp_path):
    site = tmp_path / "site-packages"
    (site / "acme_plugin").mkdir(parents=True)
    stand_in = cc(site / "acme_plugin" / "libtensorflow_framework.so.2", LIBRARY_SOURCE)
    plugin = cc(site / "acme_plugin" / "libacme.so", PLUGIN_SOURCE,
                *needing(site / "acme_plugin", "libtensorflow_framework.so.2"))
    info = site / "acme_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-plugin\nVersion: 1.0\n"
                                   "Requires-Dist: tensorflow==2.15.*\nRequires-Dist: numpy\n"
                                   "Requires-Dist: tensorflow-io; extra == \"io\"\n\nabout\n")
    (info / "RECORD").write_text("acme_plugin/libacme.so,,\n"
                                 f"acme_plugin/{os.path.basename(stand_in)},,\n")
    told = dependencies.tensorflow_build(dependencies.Tree(plugin))
    assert told == ("it links libtensorflow_framework.so.2 (TensorFlow 2.x); it comes from the "
                    "package acme-plugin==1.0, which requires tensorflow==2.15.*")


def test_the_cached_verdict_follows_the_loader_and_the_dependencies(tmp_path, monkeypatch):
    monkeypatch.setenv("PLUGGABLE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)
    deps = tmp_path / "deps"
    deps.mkdir()
    cc(deps / "libdep.so", LIBRARY_SOURCE)
    plugin = cc(tmp_path / "libneedsdep.so", PLUGIN_SOURCE, "-L", str(deps),
                "-Wl,--no-as-needed", "-l:libdep.so")  # no RUNPATH: the loader must be told
    first = probe.verdict(plugin)
    assert not first.ok and first.step == "dlopen" and "libdep.so" in first.reason
    assert probe.verdict(plugin).cached  # the same file, tree and environment
    monkeypatch.setenv("LD_LIBRARY_PATH", str(deps))  # the user mends the environment
    mended = probe.verdict(plugin)
    assert mended.ok and not mended.cached
    assert probe.verdict(plugin).cached
    os.remove(deps / "libdep.so")  # a dependency rebuilt: another file
    cc(deps / "libdep.so", LIBRARY_SOURCE, defines=["USES_MISSING_API"])
    rebuilt = probe.verdict(plugin)
    assert not rebuilt.cached
    monkeypatch.delenv("LD_LIBRARY_PATH")  # and the other way round
    again = probe.verdict(plugin)
    assert not again.ok and not again.cached and "libdep.so" in again.reason


def test_a_crash_in_an_initialiser_is_contained_by_default(tmp_path, private_manager):
    crashing = cc(tmp_path / "libcrashes.so", PLUGIN_SOURCE, "-L", str(tmp_path),
                  *needing(tmp_path, os.path.basename(
                      cc(tmp_path / "libboom.so", LIBRARY_SOURCE,
                         defines=["CRASH_IN_CONSTRUCTOR"]))))
    with pytest.raises(PluginLoadError) as contained:
        private_manager.load_plugin(crashing)  # plain load_plugin: probed first
    assert contained.value.step == "dlopen"
    assert "SIGSEGV" in contained.value.reason
    # The opt-out runs the library in this process, as asked: shown in a child here.
    code = ("import pluggable, sys; pluggable.load_plugin(sys.argv[1], isolate=False)")
    died = subprocess.run([sys.executable, "-c", code, crashing], capture_output=True)
    assert died.returncode == -11
