"""BENCHMARKS.md is written by the scripts in benchmarks/ (`--write`): every script has its
own section there, and `benchmarks/_ratios.py` replaces one section without touching the
rest. Nothing here runs a benchmark."""
import datetime
import glob
import importlib.util
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCHMARKS = os.path.join(ROOT, "benchmarks")
SCRIPTS = sorted(os.path.basename(p) for p in glob.glob(os.path.join(BENCHMARKS, "bench_*.py")))


def _load_ratios():
    spec = importlib.util.spec_from_file_location("_ratios",
                                                  os.path.join(BENCHMARKS, "_ratios.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ratios = _load_ratios()


def _document() -> str:
    with open(os.path.join(ROOT, "BENCHMARKS.md"), encoding="utf-8") as f:
        return f.read()


def _section(text: str, script: str) -> str:
    begin, end = f"<!-- {script} begin -->", f"<!-- {script} end -->"
    assert text.count(begin) == 1, f"{script}: {text.count(begin)} begin markers"
    assert text.count(end) == 1, f"{script}: {text.count(end)} end markers"
    start, stop = text.index(begin), text.index(end)
    assert start < stop
    return text[start + len(begin):stop]


def test_there_are_scripts():
    assert "bench_ops.py" in SCRIPTS and "bench_startup.py" in SCRIPTS
    assert len(SCRIPTS) >= 13


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_script_has_a_generated_section(script):
    section = _section(_document(), script)
    lines = section.strip().splitlines()
    assert re.fullmatch(rf"## .+ \(`{re.escape(script)}`\)", lines[0]), lines[0]
    run = re.search(r"^- Run: `python benchmarks/(\S+)( [^`]*)?`$", section, re.M)
    assert run and run.group(1) == script and "--write" in run.group(2)
    assert re.search(r"^- Machine: .+, \d+ cores; Python 3\.\d+\.\d+", section, re.M)
    load = re.search(r"^- Load average \(1, 5, 15 min\): (\d+\.\d\d \d+\.\d\d \d+\.\d\d) "
                     r"before, (\d+\.\d\d \d+\.\d\d \d+\.\d\d) after$", section, re.M)
    assert load, section[:400]
    date = re.search(r"^- Date: (\d{4}-\d\d-\d\d)$", section, re.M)
    assert date
    datetime.date.fromisoformat(date.group(1))
    # At least one markdown table: a header row and its separator.
    assert re.search(r"^\| .+ \|\n\| (?:---:? \| )*---:? \|$", section, re.M)
    for goal in re.findall(r"^Goal: .*(?:\n.+)*", section, re.M):
        assert re.search(r": \*\*(met|not met)\*\*", goal), goal


def test_sections_are_the_scripts_in_name_order():
    found = re.findall(r"^<!-- (\S+) begin -->$", _document(), re.M)
    assert found == SCRIPTS


def test_the_preamble_names_every_script_once():
    text = _document()
    preamble = text[:re.search(r"^<!-- \S+ begin -->$", text, re.M).start()]
    for script in SCRIPTS:
        assert len(re.findall(rf"^- `{re.escape(script)}`: ", preamble, re.M)) == 1, script
    assert "--write" in preamble


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_script_takes_write(script):
    result = subprocess.run([sys.executable, os.path.join(BENCHMARKS, script), "--help"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "--write" in result.stdout


# -- _ratios: one section replaced, one inserted ------------------------------------------

def _fake(script: str, body: str) -> str:
    return f"<!-- {script} begin -->\n## {body}\n<!-- {script} end -->\n"


DOC = ("# Benchmarks\n\nPreamble.\n\n" + _fake("bench_b.py", "old b") + "\n"
       + _fake("bench_d.py", "old d"))


def test_replace_touches_only_its_own_section():
    new = ratios.replace_section(DOC, "bench_d.py", _fake("bench_d.py", "new d"))
    assert new == ("# Benchmarks\n\nPreamble.\n\n" + _fake("bench_b.py", "old b") + "\n"
                   + _fake("bench_d.py", "new d"))
    new = ratios.replace_section(DOC, "bench_b.py", _fake("bench_b.py", "new b\n\nmore"))
    assert new == ("# Benchmarks\n\nPreamble.\n\n" + _fake("bench_b.py", "new b\n\nmore")
                   + "\n" + _fake("bench_d.py", "old d"))
    # Replacing with the same text changes nothing.
    assert ratios.replace_section(DOC, "bench_b.py", _fake("bench_b.py", "old b")) == DOC


def test_a_missing_section_is_inserted_in_name_order():
    middle = ratios.replace_section(DOC, "bench_c.py", _fake("bench_c.py", "c"))
    assert middle == ("# Benchmarks\n\nPreamble.\n\n" + _fake("bench_b.py", "old b") + "\n"
                      + _fake("bench_c.py", "c") + "\n" + _fake("bench_d.py", "old d"))
    first = ratios.replace_section(DOC, "bench_a.py", _fake("bench_a.py", "a"))
    assert first == ("# Benchmarks\n\nPreamble.\n\n" + _fake("bench_a.py", "a") + "\n"
                     + _fake("bench_b.py", "old b") + "\n" + _fake("bench_d.py", "old d"))
    last = ratios.replace_section(DOC, "bench_e.py", _fake("bench_e.py", "e"))
    assert last == DOC + "\n" + _fake("bench_e.py", "e")
    assert ratios.replace_section("", "bench_a.py", _fake("bench_a.py", "a")) == \
        _fake("bench_a.py", "a")


def test_unpaired_markers_are_refused():
    broken = DOC.replace("<!-- bench_d.py end -->\n", "")
    with pytest.raises(ValueError):
        ratios.replace_section(broken, "bench_d.py", _fake("bench_d.py", "x"))
    doubled = DOC + _fake("bench_d.py", "again")
    with pytest.raises(ValueError):
        ratios.replace_section(doubled, "bench_d.py", _fake("bench_d.py", "x"))


def test_write_section_on_a_file(tmp_path):
    path = tmp_path / "BENCHMARKS.md"
    path.write_text(DOC, encoding="utf-8")
    ratios.write_section(str(path), "bench_c.py", _fake("bench_c.py", "c"))
    ratios.write_section(str(path), "bench_b.py", _fake("bench_b.py", "b2"))
    assert path.read_text(encoding="utf-8") == (
        "# Benchmarks\n\nPreamble.\n\n" + _fake("bench_b.py", "b2") + "\n"
        + _fake("bench_c.py", "c") + "\n" + _fake("bench_d.py", "old d"))
    assert sorted(os.listdir(tmp_path)) == ["BENCHMARKS.md"]  # no temporary file left
    fresh = tmp_path / "new.md"
    ratios.write_section(str(fresh), "bench_a.py", _fake("bench_a.py", "a"))
    assert fresh.read_text(encoding="utf-8") == _fake("bench_a.py", "a")


# -- _ratios: what a section holds ---------------------------------------------------------

def test_report_section_renders_tables_goals_and_the_run(tmp_path, capsys):
    report = ratios.Report("/somewhere/bench_x.py", "What is measured", "A method\n  note.")
    report.argv = ["--rounds", "3", "--write"]
    report.load_before = (1.0, 0.5, 0.25)
    samples = {"reference": [1.0, 2.0, 4.0], "candidate": [2.0, 2.0, 2.0]}
    worst = report.table("A table", samples, "reference", "µs", 1e6, goal=1.0,
                         goal_rows=["candidate"])
    assert worst == 1.0
    report.spread("Figures", [("a ratio", [3.0, 1.0, 2.0])])
    report.goal("an absolute goal", False, "12 ms")
    printed = capsys.readouterr().out
    assert "candidate" in printed and "goal: median ratio <= 1 (candidate): met" in printed
    text = report.section(date="2026-01-02", load_after=(2.0, 1.0, 0.5),
                          machine_line="Some CPU, 2 cores; Python 3.11.7")
    assert text == """<!-- bench_x.py begin -->

## What is measured (`bench_x.py`)

- Run: `python benchmarks/bench_x.py --rounds 3 --write`
- Machine: Some CPU, 2 cores; Python 3.11.7
- Load average (1, 5, 15 min): 1.00 0.50 0.25 before, 2.00 1.00 0.50 after
- Date: 2026-01-02

A method note.

### A table

| | median | ratio min | ratio median | ratio max |
| --- | ---: | ---: | ---: | ---: |
| reference (reference) | 2000000 µs | 1.00 | 1.00 | 1.00 |
| candidate | 2000000 µs | 0.50 | 1.00 | 2.00 |

Goal: median ratio <= 1 (candidate): **met** (worst median 1.00).

### Figures

| figure | min | median | max |
| --- | ---: | ---: | ---: |
| a ratio | 1.00 | 2.00 | 3.00 |

Goal: an absolute goal: **not met** (12 ms).

<!-- bench_x.py end -->
"""
    path = tmp_path / "BENCHMARKS.md"
    path.write_text(DOC, encoding="utf-8")
    report.finish(True, path=str(path))
    written = path.read_text(encoding="utf-8")
    assert written.startswith(DOC + "\n<!-- bench_x.py begin -->\n")
    assert "Goal: an absolute goal: **not met** (12 ms)." in written
    report.finish(False, path=str(path / "never"))  # without --write nothing is written


def test_a_goal_verdict_is_never_split_across_lines():
    report = ratios.Report("bench_x.py", "T")
    for filler in range(70, 90):
        report.blocks = []
        report.goal(("words " * 20)[:filler], False, "detail")
        (block,) = report.blocks
        assert ": **not met**" in block and max(len(line) for line in block.splitlines()) <= 92


def test_machine_names_the_cpu_cores_and_versions():
    line = ratios.machine(["numpy", "no-such-distribution"])
    assert f", {os.cpu_count()} cores; Python {sys.version.split()[0]}" in line
    import numpy
    assert line.endswith(f"; NumPy {numpy.__version__}")
    with open("/proc/cpuinfo") as f:
        models = [ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")]
    if models:
        assert line.startswith(models[0] + ", ")


def test_cells_escape_pipes_and_numbers_keep_three_digits():
    assert ratios.markdown_table(["a", "b"], [("x | y", 1)]) == \
        "| a | b |\n| --- | ---: |\n| x \\| y | 1 |"
    assert [ratios.number(v) for v in (0.0312, 3.456, 34.56, 345.6)] == \
        ["0.03", "3.46", "34.6", "346"]
