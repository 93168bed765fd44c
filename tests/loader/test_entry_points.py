"""The entry-point reader discovery uses instead of importlib.metadata (_entry_points.py):
same answers as importlib.metadata, and nothing of importlib.metadata imported."""
from __future__ import annotations

import json
import re
import textwrap
from importlib import metadata

import pytest

from pluggable.plugin import entry_points as _entry_points


def make_dist(site, dist_dir: str, text: str) -> None:
    dist = site / dist_dir
    dist.mkdir(parents=True)
    name, version = dist_dir.rsplit(".", 1)[0].split("-", 1)
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    (dist / ("PKG-INFO" if dist_dir.endswith(".egg-info") else "METADATA")).write_text(meta)
    (dist / "entry_points.txt").write_text(text)


def pairs(points):
    return sorted((p.name, p.value, p.group) for p in points)


def test_parse_group_reads_only_its_section():
    text = textwrap.dedent("""
        # a comment
        [console_scripts]
        tool = pkg.cli:main

        [pluggable.plugins]
        first = pkg.paths:FIRST
          second=pkg.paths:make [extra]
        ; another comment
        [other]
        third = x:y
    """)
    points = _entry_points.parse_group(text, "pluggable.plugins")
    assert [(p.name, p.value) for p in points] == [("first", "pkg.paths:FIRST"),
                                                 ("second", "pkg.paths:make [extra]")]
    assert _entry_points.parse_group(text, "missing") == []


def test_same_answer_as_importlib_metadata(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    make_dist(first, "My.Plugin-1.0.dist-info", "[grp]\na = m:A\nb = m:B\n")
    make_dist(second, "my_plugin-2.0.dist-info", "[grp]\nshadowed = m:C\n")  # same name
    make_dist(second, "other-0.1.egg-info", "[grp]\nc = n:C\n[not.grp]\nd = n:D\n")
    (second / "nometa-1.0.dist-info").mkdir()  # a distribution without entry points
    paths = [str(first), str(second), str(tmp_path / "does-not-exist")]
    mine = _entry_points.entry_points("grp", paths)
    assert pairs(mine) == [("a", "m:A", "grp"), ("b", "m:B", "grp"), ("c", "n:C", "grp")]
    # importlib.metadata's rule: the first distribution of a normalised name wins.
    theirs, seen = [], set()
    for dist in metadata.distributions(path=paths):
        if dist.metadata["Name"] is None:  # nometa: no METADATA file, no entry points
            continue
        key = re.sub(r"[-_.]+", "_", dist.metadata["Name"]).lower()
        if key not in seen:
            seen.add(key)
            theirs.extend(p for p in dist.entry_points if p.group == "grp")
    assert pairs(mine) == pairs(theirs)


def test_load_imports_module_and_attribute(tmp_path, monkeypatch):
    (tmp_path / "ep_target_mod.py").write_text("class Holder:\n    PATH = '/x/lib.so'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    point = _entry_points.EntryPoint("p", "ep_target_mod:Holder.PATH [extra]", "g")
    assert point.load() == "/x/lib.so"
    with pytest.raises(AttributeError):
        _entry_points.EntryPoint("p", "ep_target_mod:Missing", "g").load()


def test_archives_on_the_path_fall_back_to_importlib(tmp_path):
    archive = tmp_path / "bundle.zip"
    archive.write_bytes(b"PK\x05\x06" + b"\0" * 18)
    assert _entry_points.needs_importlib([str(tmp_path), str(archive)])
    assert not _entry_points.needs_importlib([str(tmp_path), ""])


def test_discovery_does_not_import_importlib_metadata(run_python, tmp_path):
    site = tmp_path / "site"
    make_dist(site, "lazy_plugin-1.0.dist-info", "[pluggable.plugins]\nnone = lazy_paths:P\n")
    (site / "lazy_paths.py").write_text("P = '/nonexistent/libnothing.so'\n")
    code = textwrap.dedent("""
        import json, sys, warnings
        warnings.simplefilter("ignore")
        import pluggable
        pluggable.config.list_physical_devices()
        records = [r.source for r in pluggable.config.list_plugins()]
        print(json.dumps({"metadata": "importlib.metadata" in sys.modules,
                          "sources": records}))
    """)
    data = json.loads(run_python(code, env={"PYTHONPATH": str(site)}).stdout.splitlines()[-1])
    assert data["metadata"] is False
    assert any(s.startswith("entry point none (lazy_paths:P)") for s in data["sources"])


# -- what the last scan read, remembered in the cache directory -----------------------------

def _age(*paths, seconds=60):
    """Sets the modification times back, as if the files were written a while ago (a scan
    of something changed in the last two seconds is not remembered)."""
    import os
    import time

    for path in paths:
        then = time.time() - seconds
        os.utime(path, (then, then))


@pytest.fixture
def site(tmp_path, monkeypatch):
    monkeypatch.setenv("PLUGGABLE_CACHE_DIR", str(tmp_path / "cache"))
    site = tmp_path / "site"
    make_dist(site, "first-1.0.dist-info", "[grp]\na = m:A\n")
    (site / "plain-1.0.dist-info").mkdir()
    _age(site / "first-1.0.dist-info" / "entry_points.txt", site / "first-1.0.dist-info",
         site / "plain-1.0.dist-info", site)
    return site


def _cached(monkeypatch, site):
    """The answer, with the scan forbidden: it must come from the cache."""
    with monkeypatch.context() as patch:
        patch.setattr(_entry_points, "_scan", lambda *a: pytest.fail("scanned again"))
        return pairs(_entry_points.entry_points("grp", [str(site)]))


def test_an_unchanged_path_is_answered_from_the_cache(site, monkeypatch):
    assert pairs(_entry_points.entry_points("grp", [str(site)])) == [("a", "m:A", "grp")]
    assert _cached(monkeypatch, site) == [("a", "m:A", "grp")]


@pytest.mark.parametrize("change", ["installed", "removed", "edited", "added to a distribution"])
def test_a_change_of_the_metadata_is_seen(site, monkeypatch, change):
    import os
    import shutil

    _entry_points.entry_points("grp", [str(site)])
    expected = {"installed": [("a", "m:A", "grp"), ("b", "n:B", "grp")],
                "removed": [],
                "edited": [("a2", "m:A2", "grp")],
                "added to a distribution": [("a", "m:A", "grp"), ("p", "p:P", "grp")]}[change]
    if change == "installed":
        make_dist(site, "second-1.0.dist-info", "[grp]\nb = n:B\n")
    elif change == "removed":
        shutil.rmtree(site / "first-1.0.dist-info")
    elif change == "edited":  # in place: no directory changes
        points = site / "first-1.0.dist-info" / "entry_points.txt"
        points.write_text("[grp]\na2 = m:A2\n")
        stat = os.stat(site)
        os.utime(site / "first-1.0.dist-info", ns=(stat.st_atime_ns, stat.st_mtime_ns))
    else:
        (site / "plain-1.0.dist-info" / "entry_points.txt").write_text("[grp]\np = p:P\n")
    assert pairs(_entry_points.entry_points("grp", [str(site)])) == expected
    assert pairs(_entry_points.entry_points("grp", [str(site)])) == expected


def test_a_scan_of_what_just_changed_is_not_remembered(site, monkeypatch):
    make_dist(site, "second-1.0.dist-info", "[grp]\nb = n:B\n")  # now: within 2 s
    _entry_points.entry_points("grp", [str(site)])
    scans = []
    real_scan = _entry_points._scan
    monkeypatch.setattr(_entry_points, "_scan", lambda *a: (scans.append(1), real_scan(*a))[1])
    assert len(pairs(_entry_points.entry_points("grp", [str(site)]))) == 2
    assert scans == [1]


def test_an_unwritable_cache_directory_costs_a_scan_not_an_error(site, monkeypatch, tmp_path):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    monkeypatch.setenv("PLUGGABLE_CACHE_DIR", str(blocker))
    assert pairs(_entry_points.entry_points("grp", [str(site)])) == [("a", "m:A", "grp")]
    assert pairs(_entry_points.entry_points("grp", [str(site)])) == [("a", "m:A", "grp")]
