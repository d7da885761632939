"""The layers point one way, checked on the source (not by hope).

- the light client (`memvault`) imports nothing of the daemon or the server;
- the server (`memvault_server`) imports nothing that can decrypt;
- inside the daemon only the front process (`serve/front/`) and the
  memvault-server remote know gRPC, and the core never loads it;
- `memvault_base.errors` needs no grpc (the core speaks its status numbers);
- the front process loads nothing that holds or reads the vault.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _imports(package_dir: Path) -> dict[Path, set[str]]:
    found: dict[Path, set[str]] = {}
    for path in package_dir.rglob("*.py"):
        if "v1" in path.relative_to(package_dir).parts:
            continue  # generated stubs
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names |= _names(node)
        found[path] = names
    return found


def _names(node: ast.Import | ast.ImportFrom) -> set[str]:
    """The modules an import statement names (`from a import b`: a, and a.b if b is one)."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names}
    if node.level or not node.module:
        return set()
    return {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}


def _offenders(package_dir: Path, forbidden: tuple[str, ...]) -> list[str]:
    return [f"{path.relative_to(ROOT)} imports {name}"
            for path, names in _imports(package_dir).items() for name in sorted(names)
            if name.split(".")[0] in forbidden]


def test_client_never_imports_the_daemon_or_heavy_libraries() -> None:
    assert _offenders(ROOT / "client" / "memvault", (
        "memvaultd", "memvault_server", "torch", "numpy", "lancedb", "sentence_transformers",
        "onnxruntime", "onnx", "tokenizers", "cryptography", "argon2", "keyring")) == []


def test_server_never_imports_anything_that_decrypts() -> None:
    assert _offenders(ROOT / "server" / "memvault_server", (
        "memvaultd", "cryptography", "argon2", "keyring", "nacl", "Crypto")) == []


GRPC = ("grpc", "grpc_health", "grpc_reflection")


def _grpc(name: str) -> bool:
    """Whether importing `name` loads grpc: grpc's packages, the grpc stubs
    (`*_pb2_grpc`) and `memvault_base.rpc`."""
    return (name.split(".")[0] in GRPC or name.endswith("_pb2_grpc")
            or name == "memvault_base.rpc")


def test_only_the_front_and_the_server_remote_know_grpc() -> None:
    # The front process serves gRPC; the sync remote of a memvault-server
    # is its client. The core's side of serve/ speaks the link's frames.
    daemon = ROOT / "daemon" / "memvaultd"

    def edge(path: Path) -> bool:
        rel = path.relative_to(daemon)
        return rel.parts[:2] == ("serve", "front") or rel == Path("sync/remotes/grpc_remote.py")

    def stubs_allowed(path: Path) -> bool:
        return edge(path) or path.relative_to(daemon).parts[0] == "serve"

    offenders = [f"{path.relative_to(ROOT)} imports {name}"
                 for path, names in _imports(daemon).items() if not edge(path)
                 for name in sorted(names) if _grpc(name)]
    offenders += [f"{path.relative_to(ROOT)} imports the stubs"
                  for path, names in _imports(daemon).items()
                  if not stubs_allowed(path) and any(n.startswith("memvault_base.v1")
                                                     for n in names)]
    assert offenders == []


def test_the_error_tree_needs_no_grpc() -> None:
    # At its top: `error_from_status`, handed out from here to the one
    # caller that imports it from this module, imports rpc when asked for.
    tree = ast.parse((ROOT / "base" / "memvault_base" / "errors.py").read_text())
    assert [node for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)
            and node.module != "__future__" and any(
                _grpc(name) for name in _names(node))] == []
    loaded = _loaded("memvault_base.errors")
    assert not any(_grpc(name) for name in loaded)


def test_the_core_loads_no_grpc() -> None:
    # The daemon's whole process as `memvaultd` imports it; test_front.py
    # checks a running daemon's mapped libraries as well.
    loaded = _loaded("memvaultd.app.main")
    assert "memvaultd.serve.endpoint" in loaded
    assert [name for name in loaded if _grpc(name)] == []


def _loaded(module: str) -> list[str]:
    return subprocess.run(
        [sys.executable, "-c", f"import sys, {module}; print(' '.join(sys.modules))"],
        capture_output=True, text=True, check=True).stdout.split()


def test_the_front_process_loads_nothing_that_holds_or_reads_the_vault() -> None:
    # What `python -m memvaultd.serve.front` has imported once it is ready to serve.
    loaded = _loaded("memvaultd.serve.front.relay")
    ours = {name for name in loaded if name.startswith("memvaultd.")}
    assert ours == {"memvaultd.serve", "memvaultd.serve.front", "memvaultd.serve.front.relay",
                    "memvaultd.serve.front.link", "memvaultd.serve.front.peer_gate",
                    "memvaultd.serve.front.peercred"}
    heavy = {"numpy", "cryptography", "argon2", "keyring", "lancedb", "torch", "onnxruntime"}
    assert heavy.isdisjoint(name.split(".")[0] for name in loaded)
