"""The layers point one way, checked on the source (not by hope).

Every import counts: at the top of a module, under `TYPE_CHECKING` and inside
a function alike (tests/import_graph.py).

- the four packages: the light client (`memvault`) and the server
  (`memvault_server`) stand on the base package (`memvault_base`) and never
  import the daemon; the server and the base package import nothing that can
  decrypt (the server verifies an Ed25519 signature, `VERIFIES_ONLY`); the
  daemon never imports the client or the server;
- inside the daemon, each room (a folder) imports only rooms on floors below
  its own (`FLOORS`), and no two modules import each other, directly or
  around a circle;
- inside the daemon only the front process (`serve/front/`) and the
  memvault-server remote know gRPC, and the core never loads it;
  `memvault_base.errors` needs no grpc (the core speaks its status numbers);
- the front process loads nothing that holds or reads the vault.
"""

from __future__ import annotations

import subprocess
import sys

from .import_graph import ROOT, graph, imports_of, modules, third_party

# The daemon's rooms, top floor first. A room may import its own modules and
# any room on a lower floor; rooms on one floor know nothing of each other.
FLOORS = [
    {"app"},
    {"serve", "notes"},
    {"vault", "sync"},
    {"config"},
    {"recall", "upkeep", "embedding"},
    {"index", "storage"},
    {"model"},
    {"crypto"},
]
FLOOR_OF = {room: level for level, rooms in enumerate(FLOORS) for room in rooms}
# Inside serve/, the front process is a floor below the core's side.
SUB_FLOORS = {"serve": ["", "front"]}
DECRYPTS = ("cryptography", "argon2", "keyring", "nacl", "Crypto")


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_every_daemon_module_is_in_a_room() -> None:
    loose = [name for name in modules() if name.startswith("memvaultd.")
             and name.count(".") < 2 and name.removeprefix("memvaultd.") not in FLOOR_OF]
    assert loose == [], "modules outside a room (put each in the folder of its role)"
    rooms = {_room(name) for name in modules() if name.startswith("memvaultd.")}
    assert rooms == set(FLOOR_OF), "a room without a floor, or a floor without a room"


def test_packages_point_one_way() -> None:
    allowed = {"memvault_base": set(), "memvault": {"memvault_base"},
               "memvault_server": {"memvault_base"}, "memvaultd": {"memvault_base"}}
    wrong = [f"{source} imports {target} (line {line})"
             for source, targets in graph().items() for target, line in targets
             if (a := source.split(".")[0]) != (b := target.split(".")[0])
             and b not in allowed[a]]
    assert wrong == []


def test_rooms_import_only_rooms_below() -> None:
    wrong = []
    for source, targets in graph().items():
        if not source.startswith("memvaultd."):
            continue
        for target, line in targets:
            if not target.startswith("memvaultd."):
                continue
            a, b = _room(source), _room(target)
            if a == b:
                sub = SUB_FLOORS.get(a)
                if sub is not None:
                    sa, sb = (_sub(name, sub) for name in (source, target))
                    if sub.index(sb) < sub.index(sa):
                        wrong.append(f"{source} -> {target} (line {line}): up inside {a}/")
                continue
            if not b or FLOOR_OF[b] <= FLOOR_OF[a]:
                wrong.append(f"{source} -> {target} (line {line}): {a}/ may not import {b}/")
    assert wrong == []


def _sub(module: str, sub: list[str]) -> str:
    parts = module.split(".")
    return parts[2] if len(parts) > 3 and parts[2] in sub else ""


def test_no_module_imports_itself_around_a_circle() -> None:
    edges = {source: {target for target, _ in targets} for source, targets in graph().items()}
    circles = [sorted(component) for component in _strongly_connected(edges)
               if len(component) > 1]
    assert circles == []


def _strongly_connected(edges: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's algorithm, iterative."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    counter = 0
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    found.append(component)
            elif child not in index:
                index[child] = low[child] = counter
                counter += 1
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(edges.get(child, ())))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


# What the server may take from `cryptography`: verifying a device's
# Ed25519 signature (memvault_server/revocation.py), which opens nothing.
VERIFIES_ONLY = ("cryptography.hazmat.primitives.asymmetric.ed25519.Ed25519PublicKey",
                 "cryptography.exceptions.InvalidSignature")


def test_nothing_but_the_daemon_can_decrypt() -> None:
    wrong = [f"{name} imports {found.target}" for name, path in modules().items()
             if not name.startswith("memvaultd")
             for found in imports_of(name, path)
             if found.target.split(".")[0] in DECRYPTS
             and not (name.startswith("memvault_server") and found.target in VERIFIES_ONLY)]
    assert wrong == []


def test_the_client_never_loads_heavy_libraries() -> None:
    heavy = ("torch", "numpy", "lancedb", "pyarrow", "sentence_transformers", "onnxruntime",
             "onnx", "tokenizers")
    wrong = [f"{name} imports {lib}" for name, path in modules().items()
             if name.split(".")[0] in ("memvault", "memvault_base")
             for lib in third_party(name, path) if lib in heavy]
    assert wrong == []


def _grpc(name: str) -> bool:
    return (name.split(".")[0] in ("grpc", "grpc_health", "grpc_reflection")
            or name.startswith("memvault_base.rpc") or name.endswith("_pb2_grpc")
            or ".v1.memory_pb2_grpc." in name or ".v1.sync_pb2_grpc." in name)


def test_only_the_front_and_the_server_remote_know_grpc() -> None:
    # The front process serves gRPC; the sync remote of a memvault-server is
    # its client. The core's side of serve/ speaks the link's frames.
    allowed = ("memvaultd.serve.front", "memvaultd.sync.remotes.grpc_remote")
    wrong = [f"{name} imports {found.target}" for name, path in modules().items()
             if name.startswith("memvaultd.") and not name.startswith(allowed)
             for found in imports_of(name, path) if _grpc(found.target)]
    assert wrong == []


def test_the_error_tree_needs_no_grpc() -> None:
    assert not any(_grpc(name) for name in _loaded("memvault_base.errors"))


def test_the_core_loads_no_grpc() -> None:
    # The daemon's whole process as `memvaultd` imports it; test_front.py
    # checks a running daemon's mapped libraries as well.
    loaded = _loaded("memvaultd.app.main")
    assert "memvaultd.serve.endpoint" in loaded
    assert [name for name in loaded if _grpc(name)] == []


def _loaded(module: str) -> list[str]:
    return subprocess.run(
        [sys.executable, "-c", f"import sys, {module}; print(' '.join(sys.modules))"],
        capture_output=True, text=True, check=True, cwd=ROOT).stdout.split()


def test_the_front_process_loads_nothing_that_holds_or_reads_the_vault() -> None:
    # What `python -m memvaultd.serve.front` has imported once it is ready to serve.
    loaded = _loaded("memvaultd.serve.front.relay")
    ours = {name for name in loaded if name.startswith("memvaultd.")}
    assert all(name.startswith("memvaultd.serve.front") or name == "memvaultd.serve"
               for name in ours), sorted(ours)
    heavy = {"numpy", "cryptography", "argon2", "keyring", "lancedb", "torch", "onnxruntime"}
    assert heavy.isdisjoint(name.split(".")[0] for name in loaded)
