"""Every dependency pyproject.toml declares is imported by the code its
install serves, and every third-party import is declared by the install its
code runs under.

    install   serves                            runs under
    base      client/memvault, memvault_base    `dependencies`
    daemon    daemon/memvaultd                  `dependencies` + `daemon`
    server    server/memvault_server            `dependencies` + `server`
    bench     scripts/                          every extra (scripts/setup installs them all;
                                                tests/ run there too)
    dev       tools, run rather than imported   (DEV_TOOLS)

A module of memvault_base runs under the install of every package that
imports it, directly or through other memvault_base modules, and under the
base install if no package does: objects/s3.py, imported only by the
daemon's s3:// remote and the server's store, counts for the daemon and
server extras, so obstore is declared there and not for the light client.

Imports are read from the source, anywhere in a module including inside
functions (torch, onnx, sentence_transformers and lancedb are imported
lazily); import names are matched to distributions by
`importlib.metadata.packages_distributions()`, so the project must be
installed with every extra (scripts/setup).
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())

# The dev extra holds tools that are run, not imported by the project's code:
# pytest with its timeout and xdist plugins and Hypothesis run tests/, mypy
# and ruff are run by tests/test_static.py, grpcio-tools by scripts/gen-protos and
# tests/test_layout.py, build by scripts/check_install.py, selenium drives
# Chromium for tests/test_ui_browser.py, and types-* are stubs for mypy.
DEV_TOOLS = ("pytest", "pytest-timeout", "pytest-xdist", "hypothesis", "mypy", "ruff",
             "grpcio-tools", "build", "selenium")
DEV_STUBS = "types-"

# Where each package's source is, and the install it is the code of.
PACKAGES = {"memvault": ("client", "base"), "memvault_base": ("base", "base"),
            "memvaultd": ("daemon", "daemon"), "memvault_server": ("server", "server")}
USERS = ("memvault", "memvaultd", "memvault_server")  # the packages memvault_base serves


def _canonical(name: str) -> str:
    """A distribution name as PEP 503 normalises it."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _names(requirements: list[str]) -> set[str]:
    found = (re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", r) for r in requirements)
    return {_canonical(match.group()) for match in found if match}


BASE = _names(PYPROJECT["project"]["dependencies"])
EXTRAS = {extra: _names(requirements)
          for extra, requirements in PYPROJECT["project"]["optional-dependencies"].items()}
INSTALLS = {"base": BASE} | {extra: BASE | names for extra, names in EXTRAS.items()}
EVERYTHING = BASE.union(*EXTRAS.values())
PROVIDES = {top: {_canonical(dist) for dist in dists}
            for top, dists in packages_distributions().items()}


@dataclass(frozen=True)
class Module:
    name: str
    path: Path
    imports: frozenset[str]  # absolute; `from a import b` gives both a and a.b

    def third_party(self, first_party: set[str]) -> set[str]:
        tops = {name.split(".")[0] for name in self.imports}
        return {top for top in tops
                if top not in sys.stdlib_module_names and top not in first_party}


def _read(path: Path, name: str) -> Module:
    imports: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            imports |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            imports.add(node.module)
            imports |= {f"{node.module}.{alias.name}" for alias in node.names}
        # Relative imports stay inside their own package: nothing to declare.
    return Module(name, path, frozenset(imports))


def _package(top: str, folder: Path) -> dict[str, Module]:
    modules = {}
    for path in (folder / top).rglob("*.py"):
        parts = path.relative_to(folder).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = _read(path, name)
    return modules


MODULES = {name: module for top, (folder, _) in PACKAGES.items()
           for name, module in _package(top, ROOT / folder).items()}
SCRIPTS = [_read(path, path.stem) for path in sorted((ROOT / "scripts").glob("*.py"))]
TESTS = list(_package("tests", ROOT).values())
FIRST_PARTY = {*PACKAGES, "tests", *(script.name for script in SCRIPTS)}


def _in(top: str) -> list[Module]:
    return [module for name, module in MODULES.items() if name.split(".")[0] == top]


def _base_reached(modules: Iterable[Module]) -> set[str]:
    """The memvault_base modules that importing `modules` runs: those they
    import, their parent packages, and what those import in turn."""
    reached: set[str] = set()
    todo = [name for module in modules for name in module.imports]
    while todo:
        name = todo.pop()
        parts = name.split(".")
        for candidate in (".".join(parts[:i]) for i in range(1, len(parts) + 1)):
            if parts[0] == "memvault_base" and candidate in MODULES and candidate not in reached:
                reached.add(candidate)
                todo.extend(MODULES[candidate].imports)
    return reached


REACHED = {user: _base_reached(_in(user)) for user in USERS}


def _installs_of(module: Module) -> list[str]:
    """The installs `module` runs under (the rule in the docstring above)."""
    top = module.name.split(".")[0]
    if top != "memvault_base":
        return [PACKAGES[top][1]]
    users = [PACKAGES[user][1] for user in USERS if module.name in REACHED[user]]
    return users or ["base"]


def _serves(install: str) -> list[Module]:
    """The code an install exists for."""
    if install == "bench":
        return SCRIPTS
    return [module for module in MODULES.values() if install in _installs_of(module)]


def _distributions(modules: Iterable[Module]) -> set[str]:
    return {dist for module in modules
            for top in module.third_party(FIRST_PARTY) for dist in PROVIDES.get(top, ())}


def _undeclared(module: Module, install: str, declared: set[str]) -> list[str]:
    found = []
    for top in sorted(module.third_party(FIRST_PARTY)):
        dists = PROVIDES.get(top, set())
        if not dists & declared:
            found.append(f"{module.path.relative_to(ROOT)} imports {top} "
                         f"({', '.join(sorted(dists)) or 'not installed'}), "
                         f"which the {install} install does not declare")
    return found


def test_every_dependency_is_imported_by_the_code_its_install_serves() -> None:
    declared = {"base": BASE, **{extra: EXTRAS[extra] for extra in EXTRAS if extra != "dev"}}
    installed = set().union(*PROVIDES.values())
    unused = [f"{install}: {dist} is imported by none of the {len(_serves(install))} modules "
              f"it serves" + ("" if dist in installed else
                              " (not installed here: scripts/setup installs every extra)")
              for install, dists in declared.items()
              for dist in sorted(dists - _distributions(_serves(install)))]
    assert unused == []


def test_every_import_is_declared_by_the_install_its_code_runs_under() -> None:
    undeclared = [line for module in MODULES.values() for install in _installs_of(module)
                  for line in _undeclared(module, install, INSTALLS[install])]
    undeclared += [line for module in SCRIPTS + TESTS
                   for line in _undeclared(module, "scripts/setup", EVERYTHING)]
    assert undeclared == []


def test_dev_holds_only_tools() -> None:
    assert [dist for dist in sorted(EXTRAS["dev"])
            if dist not in DEV_TOOLS and not dist.startswith(DEV_STUBS)] == []


def test_setup_installs_every_extra() -> None:
    # The benchmarks and the tests import from every extra: a machine set up
    # by scripts/setup must have them all.
    installed = re.findall(r"\.\[([a-z,]+)\]", (ROOT / "scripts" / "setup").read_text())
    assert [set(extras.split(",")) for extras in installed] == [set(EXTRAS)]


def test_the_tests_pyproject_cites_exist() -> None:
    cited = re.findall(r"tests/[\w/]+\.py", (ROOT / "pyproject.toml").read_text())
    assert cited and [path for path in cited if not (ROOT / path).is_file()] == []
