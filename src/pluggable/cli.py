"""``python -m pluggable``: what the host sees.

    python -m pluggable devices   a table of devices with their details
    python -m pluggable plugins   every plugin file found, its status and why
    python -m pluggable demo      one network on every device: results and timings
    python -m pluggable conformance PATH.so [-k EXPR] [--json FILE] [--strict]
                                  the conformance checks against one plugin library
    python -m pluggable profile-summary PATH   the summary table of a saved profile
    python -m pluggable doctor PATH.so [--json]   a plugin checked in a child process
    python -m pluggable kernels [--device XPU]   the ops and the types each device runs
    python -m pluggable --version
"""
from __future__ import annotations

import argparse
import sys
import warnings
from typing import List, Optional, Sequence

from . import config
from .base.errors import PluginLoadWarning


def _table(headers: Sequence[str], rows: List[Sequence[object]]) -> str:
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = []
    for n, row in enumerate(cells):
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _bytes(n: Optional[int]) -> str:
    if n is None:
        return ""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def cmd_devices(_args) -> int:
    rows = []
    for device in config.list_physical_devices():
        d = config.get_device_details(device)
        bandwidth = d.get("memory_bandwidth")
        rows.append((device.name.replace("/physical_device:", ""), device.subdevice_type,
                     d.get("device_name"), d.get("vendor"), d.get("pci_bus_id"),
                     d.get("numa_node"), _bytes(d.get("memory_total")),
                     f"{bandwidth / 1e9:.1f} GB/s" if bandwidth else "",
                     f"{d['gflops']:.1f}" if d.get("gflops") is not None else ""))
    print(_table(("device", "platform", "name", "vendor", "pci bus id", "numa", "memory",
                  "bandwidth", "gflops"), rows))
    return 0


def cmd_plugins(_args) -> int:
    records = config.list_plugins()
    if not records:
        print("no plugins found (is PLUGGABLE_DISABLE_AUTOLOAD set? see "
              "PLUGGABLE_PLUGIN_PATH to add directories)")
        return 0
    rows = []
    for r in records:
        reason = f"{r.step}: {r.reason}" if r.step else r.reason
        kind, platform, devices = r.device_type, r.platform_name, r.device_count
        if r.status == "loaded" and kind is None:
            kind, platform, devices = _without_device(r)
        rows.append((r.status, kind, platform, devices, r.api_version,
                     r.priority, "yes" if r.provides_kernels else "no",
                     _profiler_cell(r),
                     r.path + (f" (found as {r.found_as})" if r.found_as else ""), reason))
    print(_table(("status", "type", "platform", "devices", "SE API", "priority", "kernels",
                  "profiler", "path", "reason"), rows))
    _print_graph_optimizers(records)
    return 0


def _without_device(record) -> tuple:
    """The type, platform and devices cells of a library loaded without a device (no
    SE_InitPlugin): what it provides instead ("kernels only", ...), and the device types its
    kernels serve."""
    parts = [name for name, present in (("kernels", record.provides_kernels),
                                        ("profiler", record.profiler_type is not None))
             if present] or ["graph optimizer"]  # loaded: it provides one of the three
    kind = parts[0] + " only" if len(parts) == 1 else " + ".join(parts)
    platform = "no device"
    if record.provides_kernels:
        types = sorted({k.device_type for k in config.list_kernels() if k.source == record.path})
        platform += f" (kernels for {', '.join(types) or 'no device type'})"
    return kind, platform, 0


def _print_graph_optimizers(records) -> None:
    """Graph optimizers (TF_InitGraph) the plugins registered, if any."""
    from .plugin.graph_optimizers import describe

    rows = [(r.path, describe(r.graph_optimizer, r.graph_optimizer_error)) for r in records
            if r.graph_optimizer is not None or r.graph_optimizer_error]
    if rows:
        print()
        print(_table(("plugin", "graph optimizer (TF_InitGraph)"), rows))


def cmd_kernels(args) -> int:
    """The coverage matrix: one row per op, the element types of each device type."""
    device_type = args.device.upper() if args.device else None
    matrix = config.kernel_coverage(device_type)
    columns = sorted({t for row in matrix.values() for t in row},
                     key=lambda t: (t != "CPU", t))
    if device_type and device_type not in columns:
        columns.append(device_type)
    rows = [(op,) + tuple(", ".join(row.get(c, ())) or "-" for c in columns)
            for op, row in sorted(matrix.items())]
    print(_table(("op",) + tuple(columns), rows))
    total = len(matrix)
    print()
    undefined = sorted({k.op for k in config.list_kernels(device_type=device_type)
                        if k.op not in matrix})
    if undefined:
        print(f"kernels for ops pluggable does not define (they cannot run): "
              f"{', '.join(undefined)}")
    for c in columns:
        covered = sum(1 for row in matrix.values() if row.get(c))
        print(f"{c}: kernels for {covered} of {total} ops")
    return 0


def cmd_demo(args) -> int:
    from .tools import demo

    return demo.main(args.profile_dir or "")


def cmd_conformance(args) -> int:
    from .tools import conformance

    return conformance.run(args.path, keyword=args.k, json_path=args.json,
                           verbose=not args.quiet, strict=args.strict)


def _profiler_cell(record) -> str:
    """The profiler's device type, why it was skipped, or "no"."""
    if record.profiler_type:
        return record.profiler_type
    if record.profiler_reason:
        return f"skipped ({record.profiler_reason})"
    return "yes" if record.provides_profiler and record.status != "loaded" else "no"


def cmd_profile_summary(args) -> int:
    from . import profiler
    from .base.errors import PluggableError

    try:
        result = profiler.load(args.path)
    except (OSError, PluggableError) as exc:
        print(f"pluggable profile-summary: {exc}", file=sys.stderr)
        return 1
    print(result.summary())
    return 0
def cmd_doctor(args) -> int:
    import json

    from .plugin import probe

    result = probe.doctor(args.plugin, args.timeout)
    if args.json:
        print(json.dumps(result.as_dict(), indent=2, default=str))
    else:
        print(probe.format_report(result))
    return 0 if result.ok else 1


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pluggable",
                                     description="Inspect the device plugins pluggable finds.")
    from . import __version__

    parser.add_argument("--version", action="version", version=f"pluggable {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("devices", help="list devices with their details").set_defaults(
        run=cmd_devices)
    sub.add_parser("plugins", help="list plugin files, their status and why").set_defaults(
        run=cmd_plugins)
    demo = sub.add_parser("demo", help="run one network on every device and compare")
    demo.add_argument("--profile-dir", metavar="DIR",
                      help="where to save the profile (default: ./logs)")
    demo.set_defaults(run=cmd_demo)
    check = sub.add_parser(
        "conformance", help="run the conformance checks against a plugin library",
        description="Tiered checks (loading, devices, memory, copies, streams, cross-device, "
                    "kernels, profiler) against one plugin; exit status 0 when all pass.")
    check.add_argument("path", help="the plugin's shared library")
    check.add_argument("-k", metavar="EXPR", help="only the checks whose names match "
                                                  "(pytest's -k), e.g. 'Memory or Copies'")
    check.add_argument("--json", metavar="FILE", help="also write the results to FILE")
    check.add_argument("-q", "--quiet", action="store_true", help="quiet: a dot per passing check")
    check.add_argument("--strict", action="store_true",
                       help="fail (exit status 1) when any check is skipped")
    check.set_defaults(run=cmd_conformance)
    summary = sub.add_parser("profile-summary",
                             help="print the per-op summary of a saved profile (.xplane.pb, "
                                  "or a log directory: its newest profile)")
    summary.add_argument("path")
    summary.set_defaults(run=cmd_profile_summary)
    doctor = sub.add_parser("doctor", help="check a plugin in a child process and report")
    doctor.add_argument("plugin", help="path of the plugin's shared library")
    doctor.add_argument("--json", action="store_true", help="the full report as JSON")
    doctor.add_argument("--timeout", type=float, default=None,
                        help="seconds before the child is stopped (default: "
                             "PLUGGABLE_PROBE_TIMEOUT or 10)")
    doctor.set_defaults(run=cmd_doctor)
    kernels = sub.add_parser("kernels", help="the ops and the element types each device runs "
                                             "(the kernel coverage matrix)")
    kernels.add_argument("--device", metavar="TYPE",
                         help="one device type only (XPU, CPU, ...)")
    kernels.set_defaults(run=cmd_kernels)
    args = parser.parse_args(argv)
    # The plugins table already states why a plugin was skipped.
    with warnings.catch_warnings():
        if args.command == "plugins":
            warnings.simplefilter("ignore", PluginLoadWarning)
        return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
