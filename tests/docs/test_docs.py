"""The documents stay true: every relative link in README.md and docs/*.md reaches a file (and a
heading, for a link with ``#anchor``), and every ```python block runs.

README.md's blocks run too. The blocks of one file run in order, in one namespace, in a
fresh interpreter started in a temporary directory that links to the checkout's examples/,
include/ and plugins/ (the examples run from the root of a checkout), with the XPU plugin
found by discovery as in the other tests, and pluggable's warnings turned into errors (but
in a file that runs TensorFlow, which never meets pluggable's libraries in one process).

``print(...)  # -> text``, or a print followed by comment lines ``# -> text`` (one per line
printed, in a loop too), states what the print writes: the run checks it. A block that
imports a package that is not installed (PyTorch, JAX, TensorFlow) is skipped, and the
file's test then reports a skip once the other blocks passed; such a block must not define
names that later blocks use. A block not meant to run is marked ```text or ```pycon.
"""
from __future__ import annotations

import ast
import glob
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCS = sorted(glob.glob(os.path.join(REPO, "docs", "*.md")))
DOCUMENTS = [os.path.join(REPO, "README.md"), *DOCS]

FENCE = re.compile(r"^(`{3,}|~{3,})(.*)$")
LINK = re.compile(r"(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
IMAGE = re.compile(r"!\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def relative(path: str) -> str:
    return os.path.relpath(path, REPO)


def prose_lines(text: str):
    """(line number, line) of the lines outside fenced code blocks."""
    fence = None
    for number, line in enumerate(text.splitlines(), 1):
        match = FENCE.match(line.strip())
        if match:
            if fence is None:
                fence = match.group(1)[0] * 3
                continue
            if match.group(1).startswith(fence) and not match.group(2).strip():
                fence = None
                continue
        if fence is None:
            yield number, line


def code_blocks(text: str, language: str):
    """(first line number, source) of every fenced block of ``language``."""
    blocks, lines = [], text.splitlines()
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i].strip())
        if match:
            fence, info = match.group(1), match.group(2).strip()
            end = i + 1
            while end < len(lines) and not (lines[end].strip().startswith(fence)
                                            and not lines[end].strip().strip(fence[0])):
                end += 1
            if info.split()[:1] == [language]:
                blocks.append((i + 2, textwrap.dedent("\n".join(lines[i + 1:end])) + "\n"))
            i = end + 1
        else:
            i += 1
    return blocks


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: markup and punctuation dropped, lower case, spaces
    turned into hyphens (hyphens and underscores kept)."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)   # links keep their text
    text = re.sub(r"<[^>]+>", "", text)                          # inline HTML
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: str) -> set:
    seen, result = {}, set()
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for _, line in prose_lines(text):
        match = re.match(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        slug = github_slug(match.group(2))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        result.add(slug if count == 0 else f"{slug}-{count}")
    return result


def links(path: str):
    """(line number, target) of every relative link outside code (inline code spans too)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for number, line in prose_lines(text):
        line = re.sub(r"`[^`]*`", "", line)
        for pattern in (LINK, IMAGE):
            for match in pattern.finditer(line):
                target = match.group(1)
                if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):   # http:, mailto:, ...
                    continue
                yield number, target


# --- the link checker itself ------------------------------------------------------------------

def test_github_slugs():
    assert github_slug("DLPack: NumPy, PyTorch, JAX") == "dlpack-numpy-pytorch-jax"
    assert github_slug("Creation, indexing and operators") == "creation-indexing-and-operators"
    assert github_slug("The extension chain (`pluggable/plugin_ext.h`)") == \
        "the-extension-chain-pluggableplugin_exth"
    assert github_slug("`struct_size` rules") == "struct_size-rules"
    assert github_slug("Streams, events, timers") == "streams-events-timers"
    assert github_slug("Step by step: a [link](x.md) -- 2") == "step-by-step-a-link----2"


def test_anchors_number_repeated_headings_and_skip_code(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Title\n## Notes\n```sh\n# not a heading\n```\n## Notes\n")
    assert anchors(str(page)) == {"title", "notes", "notes-1"}


def test_links_skip_code_urls_and_find_images(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("[a](a.md#x) `[b](b.md)` [c](https://example.com) ![d](img/d.png)\n"
                    "```text\n[e](e.md)\n```\n")
    assert list(links(str(page))) == [(1, "a.md#x"), (1, "img/d.png")]


# --- links --------------------------------------------------------------------------------------

def test_the_documents_exist():
    names = {relative(p) for p in DOCUMENTS}
    assert {"README.md", "docs/user-guide.md", "docs/plugin-authors.md",
            "docs/tensorflow-compatibility.md", "docs/troubleshooting.md",
            "docs/design.md"} <= names


def test_the_readme_fits_a_screen_or_two():
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        assert len(f.read().splitlines()) <= 250


def test_the_readme_keeps_the_two_commands():
    """`.ci/run` runs the test command exactly as the README gives it."""
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        text = f.read()
    commands = [source.strip() for _, source in code_blocks(text, "sh")]
    assert commands[:2] == ["python -m pip install . && python -m pluggable demo",
                            'python -m pip install ".[test]" && python -m pytest']
    with open(os.path.join(REPO, ".ci", "run"), encoding="utf-8") as f:
        assert commands[1] in f.read()


@pytest.mark.parametrize("document", DOCUMENTS, ids=relative)
def test_relative_links_resolve(document):
    broken = []
    for number, target in links(document):
        path, _, anchor = target.partition("#")
        resolved = os.path.normpath(os.path.join(os.path.dirname(document), path)) if path \
            else document
        where = f"{relative(document)}:{number}: {target}"
        if not os.path.exists(resolved):
            broken.append(f"{where}: no file {relative(resolved)}")
            continue
        if anchor:
            if not resolved.endswith(".md"):
                broken.append(f"{where}: an anchor into a file that is not Markdown")
            elif anchor not in anchors(resolved):
                broken.append(f"{where}: no heading #{anchor} in {relative(resolved)}")
    assert not broken, "\n".join(broken)


def test_every_document_is_linked_from_the_readme():
    readme = os.path.join(REPO, "README.md")
    targets = {os.path.normpath(os.path.join(REPO, t.partition("#")[0]))
               for _, t in links(readme)}
    missing = [relative(d) for d in DOCS if d not in targets]
    assert not missing, f"README.md does not link to {missing}"


# --- code blocks --------------------------------------------------------------------------------

RUNNER = r'''
import ast, builtins, importlib.util, io, json, re, sys, traceback, warnings

blocks = json.load(sys.stdin)
# TensorFlow exports the TF_* functions too: a file that runs it never loads pluggable's
# libraries, not even for the warning filter.
if not any(re.search(r"^\s*(import|from)\s+tensorflow\b", source, re.M)
           for _, source, _ in blocks):
    warnings.simplefilter("error", __import__("pluggable").errors.PluggableWarning)
report = {"ran": [], "skipped": [], "mismatches": [], "error": None}
expected = {}   # (block, line) -> list of expected printed lines
for index, (first_line, source, expects) in enumerate(blocks):
    for line, texts in expects:
        expected[(f"<block {index}>", line)] = texts
printed = {}   # (block, line) -> the lines printed there
real_print = builtins.print


def checked_print(*args, sep=" ", end="\n", file=None, flush=False):
    if file is None:
        frame = sys._getframe(1)
        key = (frame.f_code.co_filename, frame.f_lineno)
        if key in expected:
            buffer = io.StringIO()
            real_print(*args, sep=sep, end=end, file=buffer)
            printed.setdefault(key, []).extend(buffer.getvalue().rstrip("\n").split("\n"))
    real_print(*args, sep=sep, end=end, file=file, flush=flush)


namespace = {"__name__": "__main__", "print": checked_print}
for index, (first_line, source, expects) in enumerate(blocks):
    tree = ast.parse(source)
    modules = {alias.name.split(".")[0] for node in ast.walk(tree)
               if isinstance(node, ast.Import) for alias in node.names}
    modules |= {node.module.split(".")[0] for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.module and not node.level}
    absent = sorted(m for m in modules if importlib.util.find_spec(m) is None)
    if absent:
        report["skipped"].append({"line": first_line, "missing": absent})
        continue
    try:
        exec(compile(source, f"<block {index}>", "exec"), namespace)
    except BaseException:
        report["error"] = {"line": first_line, "traceback": traceback.format_exc()}
        break
    report["ran"].append(first_line)
for (block, line), texts in expected.items():
    index = int(block.split()[1].rstrip(">"))
    if blocks[index][0] not in report["ran"]:
        continue   # a block skipped, or not reached after a failure
    if printed.get((block, line)) != texts:
        report["mismatches"].append({"line": blocks[index][0] + line - 1, "expected": texts,
                                     "got": printed.get((block, line))})
sys.stdout.flush()
real_print("\n@@REPORT@@" + json.dumps(report))
'''


def expectations(source: str):
    """[line in block, expected lines] for every print whose output the block states: a
    ``# -> text`` comment on the print's (last) line, or comment lines of that form under it
    (one per line printed, in a loop too). The line is where the print call starts."""
    lines = source.splitlines()
    prints = [node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Call)
              and isinstance(node.func, ast.Name) and node.func.id == "print"]
    result = {}
    statement = None
    for number, line in enumerate(lines, 1):
        code, marker, text = line.partition("# -> ")
        if code.strip():
            statement = number
        elif not marker and line.strip():
            statement = None   # another comment: a '# ->' under it belongs to nothing
        if not marker:
            continue
        calls = [c for c in prints if statement and c.lineno <= statement <= c.end_lineno]
        if not calls:
            raise AssertionError(f"line {number}: '# ->' under a line that does not print: "
                                 f"{lines[statement - 1] if statement else line!r}")
        result.setdefault(calls[0].lineno, []).append(text.rstrip())
    return [[line, texts] for line, texts in result.items()]


CHECKOUT = ("examples", "include", "plugins")


def run_blocks(document: str, tmp_path):
    with open(document, encoding="utf-8") as f:
        blocks = code_blocks(f.read(), "python")
    payload = [[first, source, expectations(source)] for first, source in blocks]
    env = dict(os.environ)  # the interpreter's own pluggable, installed or editable
    for name in CHECKOUT:   # the examples run as from the root of a checkout
        os.symlink(os.path.join(REPO, name), os.path.join(str(tmp_path), name))
    result = subprocess.run([sys.executable, "-c", RUNNER], input=json.dumps(payload),
                            capture_output=True, text=True, timeout=900, cwd=str(tmp_path),
                            env=env)
    out, _, tail = result.stdout.rpartition("\n@@REPORT@@")
    assert tail, f"{relative(document)}: the run ended early ({result.returncode}):\n" \
                 f"{result.stdout}\n{result.stderr[-4000:]}"
    return blocks, json.loads(tail), out


def test_expectations_are_read_from_comments():
    source = ("x = 1\nprint(x)  # -> 1\nprint(x, x)\n# -> 1 1\nfor i in (1, 2):\n"
              "    print(i)\n# -> 1\n# -> 2\n")
    assert expectations(source) == [[2, ["1"]], [3, ["1 1"]], [6, ["1", "2"]]]
    with pytest.raises(AssertionError, match="does not print"):
        expectations("x = 1  # -> 1\n")
    with pytest.raises(AssertionError, match="does not print"):
        expectations("print(1)\n# a remark\n# -> 1\n")
    assert expectations("print(1,\n      2)  # -> 1 2\n") == [[1, ["1 2"]]]


def test_a_wrong_expectation_is_reported(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("```python\nprint(1 + 1)  # -> 3\nprint('ok')  # -> ok\n```\n")
    blocks, report, out = run_blocks(str(page), tmp_path)
    assert report["error"] is None and report["ran"] == [2]
    assert report["mismatches"] == [{"line": 2, "expected": ["3"], "got": ["2"]}]


def test_a_block_needing_an_absent_package_is_skipped(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("```python\nx = 2\n```\n\n```python\nimport no_such_package_here\n"
                    "print(x)  # -> 3\n```\n\n```python\nprint(x * 2)  # -> 4\n```\n")
    blocks, report, out = run_blocks(str(page), tmp_path)
    assert report == {"ran": [2, 11], "mismatches": [], "error": None,
                      "skipped": [{"line": 6, "missing": ["no_such_package_here"]}]}


@pytest.mark.parametrize("document", [os.path.join(REPO, "README.md"), *DOCS], ids=relative)
def test_python_blocks_run(document, tmp_path):
    blocks, report, out = run_blocks(document, tmp_path)
    where = relative(document)
    assert report["error"] is None, \
        f"{where}: the block at line {report['error']['line']} failed:\n" \
        f"{report['error']['traceback']}\n--- output ---\n{out[-3000:]}"
    problems = [f"{where}:{m['line']}: printed {m['got']}, the comment says {m['expected']}"
                for m in report["mismatches"]]
    assert not problems, "\n".join(problems)
    assert len(report["ran"]) + len(report["skipped"]) == len(blocks)
    if report["skipped"]:
        pytest.skip(f"{where}: ran {len(report['ran'])} blocks; skipped "
                    + ", ".join(f"line {s['line']} (needs {', '.join(s['missing'])})"
                                for s in report["skipped"]))

