"""The project's import graph, read from the source: every import, including
those under `TYPE_CHECKING` and inside functions, resolved to the project's
own modules. Used by tests/test_layers.py."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Each top-level package and the folder holding it.
PACKAGES = {"memvault_base": "base", "memvault": "client", "memvaultd": "daemon",
            "memvault_server": "server"}


@dataclass(frozen=True)
class Import:
    source: str  # the importing module, dotted
    target: str  # the imported module (or name), dotted and absolute
    line: int


def modules() -> dict[str, Path]:
    """Every module of the project's packages, by dotted name (generated stubs left out)."""
    found = {}
    for package, folder in PACKAGES.items():
        for path in sorted((ROOT / folder / package).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if "v1" in parts:
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def imports_of(name: str, path: Path) -> Iterator[Import]:
    package = name if _is_package(path) else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(name, alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            for alias in node.names:
                # `from package import module` names a module; `from module
                # import name` names something in it: both resolve below.
                yield Import(name, f"{module}.{alias.name}", node.lineno)


def resolve(target: str, known: dict[str, Path]) -> str | None:
    """The project module `target` names (itself, or the module holding the
    name it imports), or None when it is outside the project."""
    while target:
        if target in known:
            return target
        target = target.rpartition(".")[0]
    return None


def graph() -> dict[str, set[tuple[str, int]]]:
    """module -> {(imported project module, line)}, a module's own package face left out."""
    known = modules()
    edges: dict[str, set[tuple[str, int]]] = {name: set() for name in known}
    for name, path in known.items():
        for found in imports_of(name, path):
            target = resolve(found.target, known)
            if target is not None and target != name:
                edges[name].add((target, found.line))
    return edges


def third_party(name: str, path: Path) -> set[str]:
    """The top-level names of what `name` imports from outside the project."""
    return {found.target.split(".")[0] for found in imports_of(name, path)
            if found.target.split(".")[0] not in PACKAGES}
