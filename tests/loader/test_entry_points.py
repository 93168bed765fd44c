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
