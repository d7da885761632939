"""The layers point one way, checked on the source (not by hope).

- the light client (`memvault`) imports nothing of the daemon or the server;
- the server (`memvault_server`) imports nothing that can decrypt;
- inside the daemon only the gRPC edge (servicer, server, main, the front
  process and its link) knows gRPC;
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
            if isinstance(node, ast.Import):
                names |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module)
        found[path] = names
    return found


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


def test_only_the_grpc_edge_of_the_daemon_knows_grpc() -> None:
    # The gRPC edges: serving the daemon's own service (serve/), and the
    # remote it syncs with.
    daemon = ROOT / "daemon" / "memvaultd"

    def edge(path: Path) -> bool:
        rel = path.relative_to(daemon)
        return rel.parts[0] == "serve" or rel == Path("sync/remotes/grpc_remote.py")

    offenders = [line for line in _offenders(daemon, ("grpc", "grpc_health", "grpc_reflection"))
                 if not edge(ROOT / line.split()[0])]
    offenders += [f"{path.relative_to(ROOT)} imports the stubs"
                  for path, names in _imports(daemon).items()
                  if not edge(path) and any(n.startswith("memvault_base.v1") for n in names)]
    assert offenders == []


def test_the_front_process_loads_nothing_that_holds_or_reads_the_vault() -> None:
    # What `python -m memvaultd.serve.front.relay` has imported once it is ready to serve.
    loaded = subprocess.run(
        [sys.executable, "-c",
         "import sys, memvaultd.serve.front.relay; print(' '.join(sys.modules))"],
        capture_output=True, text=True, check=True).stdout.split()
    ours = {name for name in loaded if name.startswith("memvaultd.")}
    assert ours == {"memvaultd.serve", "memvaultd.serve.front", "memvaultd.serve.front.relay",
                    "memvaultd.serve.front.link", "memvaultd.serve.front.peer_gate",
                    "memvaultd.serve.front.peercred"}
    heavy = {"numpy", "cryptography", "argon2", "keyring", "lancedb", "torch", "onnxruntime"}
    assert heavy.isdisjoint(name.split(".")[0] for name in loaded)
