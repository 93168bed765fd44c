"""The package is a house of floors (docs/architecture.md): a module imports only from its own
subpackage or from the floors below it, at any point of its run (function-level imports
included); an import under ``if TYPE_CHECKING:`` is only a name for a type checker and is
allowed upward. Import cycles stay inside one subpackage.
"""
from __future__ import annotations

import ast
import pathlib
import re

import pytest

SOURCE = pathlib.Path(__file__).resolve().parents[2] / "src" / "pluggable"

# The floors, lowest first. A module's unit is its first package under pluggable; every
# module not in a listed subpackage (ops.py, raw_ops.py, config.py, profiler/, tools/, ...)
# is one of the public faces on the top floor.
FLOORS = {
    "abi": 1,
    "base": 2,
    "plugin": 3,
    "devices": 4,
    "oplib": 5,
    "kernels": 6,
    "loader": 7,
    "tensors": 8,
    "eager": 9,
}
FACES = 10
# The compiled extension module belongs to the floor of the module that binds it
# (pluggable.base.native hands it the runtime library's functions).
COMPILED = {"pluggable._compiled": "base"}


def module_name(path: pathlib.Path) -> str:
    parts = ("pluggable",) + path.relative_to(SOURCE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def unit_of(module: str) -> str:
    if module in COMPILED:
        return COMPILED[module]
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in FLOORS:
        return parts[1]
    return "faces"


def floor_of(module: str) -> int:
    return FLOORS.get(unit_of(module), FACES)


MODULES = {module_name(p): p for p in SOURCE.rglob("*.py")}
MODULES.update({name: SOURCE / name.split(".")[-1] for name in COMPILED})


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _runtime_imports(tree: ast.AST):
    """The import nodes that run, skipping ``if TYPE_CHECKING:`` bodies."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def imports_of(module: str):
    """(imported module, line) for every run-time import of ``module`` inside pluggable."""
    path = MODULES[module]
    if module in COMPILED:
        return
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text(), str(path))
    for node in _runtime_imports(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            # `from x import y` imports the module x.y when there is one, else a name of x.
            targets = [f"{origin}.{alias.name}" if f"{origin}.{alias.name}" in MODULES
                       else origin for alias in node.names]
        for target in targets:
            while target and target not in MODULES and "." in target:
                target = target.rpartition(".")[0]
            if target in MODULES and target != module:
                yield target, node.lineno


def test_every_module_has_a_floor():
    assert "pluggable.base.errors" in MODULES and "pluggable.eager.dispatch" in MODULES
    assert floor_of("pluggable.abi.tf_status") < floor_of("pluggable.base.errors") \
        < floor_of("pluggable.plugin.probe") < floor_of("pluggable.devices.stream") \
        < floor_of("pluggable.oplib.core") < floor_of("pluggable.kernels.registry") \
        < floor_of("pluggable.loader.plugin_manager") < floor_of("pluggable.tensors.tensor") \
        < floor_of("pluggable.eager.dispatch") < floor_of("pluggable.ops")


def test_imports_only_go_down():
    upward = []
    for module in sorted(MODULES):
        for target, line in imports_of(module):
            if unit_of(target) == unit_of(module):
                continue
            if floor_of(target) >= floor_of(module):
                upward.append(f"{MODULES[module].relative_to(SOURCE.parent)}:{line}: "
                              f"{module} (floor {floor_of(module)}) imports {target} "
                              f"(floor {floor_of(target)})")
    assert not upward, "imports that go up or sideways a floor:\n" + "\n".join(upward)


def _cycles(graph):
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = counter[0]; counter[0] += 1
        stack.append(root); on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter[0]; counter[0] += 1
                    stack.append(child); on_stack.add(child)
                    work.append((child, iter(graph[child])))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop(); on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        out.append(sorted(component))
    return out


def test_cycles_stay_inside_one_subpackage():
    graph = {m: sorted({t for t, _ in imports_of(m)}) for m in MODULES}
    crossing = [c for c in _cycles(graph) if len({unit_of(m) for m in c}) > 1]
    assert not crossing, f"import cycles across subpackages: {crossing}"


@pytest.mark.parametrize("source", sorted((SOURCE / "_compiled").glob("*.c")), ids=lambda p: p.name)
def test_compiled_code_imports_no_module_of_the_package(source):
    # The extension is handed what it needs by Python at import (pluggable.base.native);
    # it never imports the package's modules or reads their names.
    text = source.read_text()
    assert not re.findall(r'PyImport_Import\w*\(\s*"pluggable', text)


def test_the_checker_sees_an_upward_import(tmp_path, monkeypatch):
    # The rule is not vacuous: a function-level import from a lower floor to a higher one is
    # found, and the same import under TYPE_CHECKING is not.
    tree = ast.parse("def f():\n    from ..eager import dispatch\n"
                     "if TYPE_CHECKING:\n    from ..tensors import tensor\n")
    found = [n for n in _runtime_imports(tree)]
    assert [n.module for n in found] == ["eager"]
