"""Ratios against a reference measured in the same run, for every benchmark here, and the
sections of BENCHMARKS.md they write.

A figure is only meaningful beside its reference taken on the same machine at the same
moment: this 2-core machine is shared, so absolute times move by 2x with the load. Each
benchmark therefore measures in rounds, the candidate and its reference back to back in
each round, and reports the per-round ratio candidate / reference as min / median / max,
with the 1-minute load average (os.getloadavg) before and after.

Every script takes `--write` (`add_write_flag`): it runs and prints as usual, then replaces
its own section of BENCHMARKS.md, between ``<!-- bench_x.py begin -->`` and
``<!-- bench_x.py end -->``, with this run's tables (`Report`); a script without a section
gets one, placed in the order of the scripts' names. The rest of the file is left as it is.
"""
from __future__ import annotations

import os
import platform
import re
import shlex
import statistics
import sys
import textwrap
import time
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

BENCHMARKS_MD = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                             "BENCHMARKS.md")


def load() -> str:
    """The 1-, 5- and 15-minute load averages and the core count, for the report."""
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def time_per_call(fn: Callable[[], object], calls: int) -> float:
    """Seconds per call of `fn`, over `calls` calls in a row."""
    started = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - started) / calls


def best_per_call(fn: Callable[[], object], calls: int, batches: int) -> Callable[[], float]:
    """A sampler: the fastest of `batches` batches of `calls` calls, per call. On a loaded
    machine a batch that was preempted says nothing about the code; the fastest one does."""
    def sample() -> float:
        return min(time_per_call(fn, calls) for _ in range(batches))
    return sample


def per_op(run_batch: Callable[[], object], ops_per_batch: int, batches: int) -> float:
    """Seconds per op: the median over `batches` runs of `run_batch()` (which issues
    `ops_per_batch` ops and waits for the device), after one run to warm up."""
    run_batch()
    samples = []
    for _ in range(batches):
        started = time.perf_counter()
        run_batch()
        samples.append((time.perf_counter() - started) / ops_per_batch)
    return statistics.median(samples)


def rounds(candidates: Dict[str, Callable[[], float]], count: int) -> Dict[str, List[float]]:
    """Runs every sampler once per round, interleaved, `count` rounds; the samples by name."""
    out: Dict[str, List[float]] = {name: [] for name in candidates}
    for sampler in candidates.values():  # warm-up: caches, pools, lazily built plans
        sampler()
    for _ in range(count):
        for name, sampler in candidates.items():
            out[name].append(sampler())
    return out


def ratio_stats(samples: Sequence[float], reference: Sequence[float]):
    """(min, median, max) of the per-round ratios samples[i] / reference[i]."""
    ratios = [s / r for s, r in zip(samples, reference)]
    return min(ratios), statistics.median(ratios), max(ratios)


def spread(values: Sequence[float]) -> Tuple[float, float, float]:
    """(min, median, max) of `values`."""
    return min(values), statistics.median(values), max(values)


def number(value: float) -> str:
    """A measured figure with three significant digits or two decimals, whichever is longer."""
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def machine(uses: Iterable[str] = ()) -> str:
    """The CPU model (/proc/cpuinfo), the core count, Python's version and the versions of
    the libraries in `uses` that are installed (distribution names: numpy, torch, ...)."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    parts = [f"{model}, {os.cpu_count()} cores", f"Python {platform.python_version()}"]
    names = {"numpy": "NumPy", "torch": "PyTorch", "protobuf": "protobuf", "jax": "JAX"}
    for name in uses:
        version = _version(name)
        if version:
            parts.append(f"{names.get(name, name)} {version}")
    return "; ".join(parts)


def _version(name: str) -> Optional[str]:
    module = sys.modules.get(name)
    if module is not None and getattr(module, "__version__", None):
        return str(module.__version__)
    try:
        from importlib import metadata
        return metadata.version(name)
    except Exception:
        return None


def add_write_flag(parser) -> None:
    """`--write`: after the run, replace this script's section of BENCHMARKS.md."""
    parser.add_argument("--write", action="store_true",
                        help="replace this script's section of BENCHMARKS.md with this "
                             "run's tables (machine, load, date)")


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|")


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[object]],
                   numeric_from: int = 1) -> str:
    """A markdown table; columns from `numeric_from` on are aligned right."""
    def line(cells) -> str:
        return "|" + "|".join(f" {_cell(c)} " if str(c) else " " for c in cells) + "|"

    align = ["---" if i < numeric_from else "---:" for i in range(len(header))]
    return "\n".join([line(header), line(align), *(line(row) for row in rows)])


def _text_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(c) for c in header]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    out = []
    for row in cells:
        first = row[0].ljust(widths[0])
        out.append("  " + "  ".join([first] + [c.rjust(w) for c, w in zip(row[1:], widths[1:])]))
    return "\n".join(out)


class Report:
    """One run of a script: the tables it prints, kept to become its section of
    BENCHMARKS.md (`write`). `title` names what is measured; `note` is a paragraph of the
    section (the method, what a figure means) that the script owns; `uses` names the
    libraries whose versions the machine line gives."""

    def __init__(self, script: str, title: str, note: str = "", uses: Iterable[str] = ()):
        self.script = os.path.basename(script)
        self.title = title
        self.note = note
        self.uses = tuple(uses)
        self.load_before = os.getloadavg()
        self.argv = list(sys.argv[1:])
        self.blocks: List[str] = []

    # -- tables ---------------------------------------------------------------------------

    def table(self, title: str, samples: Dict[str, List[float]], reference: str, unit: str,
              scale: float, goal: float = None, goal_rows: Sequence[str] = (),
              goal_label: str = "") -> Optional[float]:
        """Each row's median time (seconds * `scale`, in `unit`) and its per-round ratio to
        `reference`, min / median / max. With `goal`: whether the worst median ratio of
        `goal_rows` (default: every other row) is at most `goal`; returns that worst median."""
        print(f"\n{title}  ({load()})")
        print(f"  {'':<44} {'median':>12} {'ratio min':>9} {'median':>7} {'max':>7}")
        rows = []
        for name, values in samples.items():
            lo, mid, hi = ratio_stats(values, samples[reference])
            mark = "" if name != reference else "  (reference)"
            print(f"  {name:<44} {statistics.median(values) * scale:9.2f} {unit:<2} "
                  f"{lo:9.2f} {mid:7.2f} {hi:7.2f}{mark}")
            label = f"{name} (reference)" if name == reference else name
            rows.append((label, f"{number(statistics.median(values) * scale)} {unit}",
                         f"{lo:.2f}", f"{mid:.2f}", f"{hi:.2f}"))
        self._block(title, markdown_table(["", "median", "ratio min", "ratio median",
                                           "ratio max"], rows))
        if goal is None:
            return None
        chosen = list(goal_rows) or [n for n in samples if n != reference]
        worst = max(ratio_stats(samples[n], samples[reference])[1] for n in chosen)
        label = goal_label or ", ".join(chosen)
        self.goal(f"median ratio <= {goal:g} ({label})", worst <= goal,
                  f"worst median {worst:.2f}")
        return worst

    def pairs(self, title: str, rows: Sequence[Tuple[str, List[float], List[float]]],
              candidate: str, reference: str, unit: str, scale: float) -> None:
        """One row per case: the candidate's and the reference's median times and the
        per-round ratio candidate / reference, min / median / max."""
        header = ["", f"{candidate} median", f"{reference} median", "ratio min",
                  "ratio median", "ratio max"]
        out = []
        for name, mine, theirs in rows:
            lo, mid, hi = ratio_stats(mine, theirs)
            out.append((name, f"{number(statistics.median(mine) * scale)} {unit}",
                        f"{number(statistics.median(theirs) * scale)} {unit}",
                        f"{lo:.2f}", f"{mid:.2f}", f"{hi:.2f}"))
        self.rows(title, header, out)

    def spread(self, title: str, rows: Sequence[Tuple[str, Sequence[float]]],
               header: str = "figure") -> None:
        """One row per figure already measured per round (a ratio, or a time): min / median
        / max over the rounds."""
        out = [(name, *(f"{v:.2f}" for v in spread(values))) for name, values in rows]
        self.rows(title, [header, "min", "median", "max"], out)

    def rows(self, title: str, header: Sequence[str], rows: Sequence[Sequence[object]],
             numeric_from: int = 1) -> None:
        """Any table: printed aligned, kept as markdown."""
        print(f"\n{title}  ({load()})")
        print(_text_table(header, rows))
        self._block(title, markdown_table(header, rows, numeric_from))

    def goal(self, text: str, met: bool, detail: str = "") -> None:
        """A goal line under the last table: met or not met."""
        verdict = "met" if met else "not met"
        print(f"  goal: {text}: {verdict}" + (f" ({detail})" if detail else ""))
        # The verdict stays on one line with the colon before it: a no-break placeholder
        # while wrapping.
        joined = f":_**{verdict.replace(' ', '_')}**"
        line = paragraph(f"Goal: {text}{joined}" + (f" ({detail})." if detail else "."))
        self.blocks.append(line.replace(joined, f": **{verdict}**"))

    def text(self, text: str) -> None:
        """A paragraph of the section after the last table (a finding of this run)."""
        print(f"  {text}")
        self.blocks.append(paragraph(text))

    def _block(self, title: str, table: str) -> None:
        self.blocks.append(f"### {title}\n\n{table}")

    # -- the section ----------------------------------------------------------------------

    def section(self, date: str = None, load_after=None, machine_line: str = None) -> str:
        """This run's section of BENCHMARKS.md, markers included."""
        after = load_after if load_after is not None else os.getloadavg()
        command = " ".join(["python", f"benchmarks/{self.script}",
                            *(shlex.quote(a) for a in self.argv)])
        return render_section(
            self.script, self.title, command,
            machine_line if machine_line is not None else machine(self.uses),
            self.load_before, after,
            date or time.strftime("%Y-%m-%d", time.gmtime()),
            self.note, self.blocks)

    def finish(self, write: bool, path: str = None) -> None:
        """With `write`, replaces the script's section of BENCHMARKS.md (or `path`)."""
        if not write:
            return
        path = path or BENCHMARKS_MD
        write_section(path, self.script, self.section())
        print(f"\nwrote the {self.script} section of {path}")


def paragraph(text: str, width: int = 92) -> str:
    """`text` as one markdown paragraph, its lines at most `width` characters."""
    return textwrap.fill(" ".join(text.split()), width, break_long_words=False,
                         break_on_hyphens=False)


def markers(script: str) -> Tuple[str, str]:
    return f"<!-- {script} begin -->", f"<!-- {script} end -->"


def _loads(values) -> str:
    return " ".join(f"{v:.2f}" for v in values)


def render_section(script: str, title: str, command: str, machine_line: str,
                   load_before, load_after, date: str, note: str,
                   blocks: Sequence[str]) -> str:
    """A script's section: markers, heading, how to run it, machine, load, date, the note,
    the tables."""
    begin, end = markers(script)
    parts = [begin,
             f"## {title} (`{script}`)",
             f"- Run: `{command}`\n"
             f"- Machine: {machine_line}\n"
             f"- Load average (1, 5, 15 min): {_loads(load_before)} before, "
             f"{_loads(load_after)} after\n"
             f"- Date: {date}"]
    if note:
        parts.append(paragraph(note))
    parts += list(blocks)
    parts.append(end)
    return "\n\n".join(parts) + "\n"


_BEGIN = re.compile(r"^<!-- (\S+) begin -->$", re.M)


def replace_section(text: str, script: str, section: str) -> str:
    """`text` with `script`'s section replaced by `section` (which carries the markers);
    when the file has none, the section goes before the first section of a script whose
    name sorts after `script`'s, or at the end."""
    begin, end = markers(script)
    if not section.endswith("\n"):
        section += "\n"
    start, stop = text.find(begin), text.find(end)
    if (start < 0) != (stop < 0) or stop < start:
        raise ValueError(f"{script}'s markers in BENCHMARKS.md are not a begin/end pair")
    if start >= 0:
        if text.find(begin, start + 1) >= 0:
            raise ValueError(f"{script} has two sections in BENCHMARKS.md")
        stop += len(end)
        if text[stop:stop + 1] == "\n":
            stop += 1
        return text[:start] + section + text[stop:]
    for match in _BEGIN.finditer(text):
        if match.group(1) > script:
            return text[:match.start()] + section + "\n" + text[match.start():]
    if text and not text.endswith("\n"):
        text += "\n"
    return text + ("\n" if text else "") + section


def write_section(path: str, script: str, section: str) -> None:
    """Replaces (or inserts) `script`'s section of the file at `path`."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        text = ""
    new = replace_section(text, script, section)
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "w", encoding="utf-8") as f:
        f.write(new)
    os.replace(temporary, path)
