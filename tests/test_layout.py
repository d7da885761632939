"""The package layout keeps its promises: fresh stubs, a light client."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from .daemon_process import DaemonProcess

ROOT = Path(__file__).resolve().parent.parent


def test_committed_stubs_match_the_protos(tmp_path: Path) -> None:
    from grpc_tools import protoc

    protos = sorted(str(p.relative_to(ROOT / "proto")) for p in (ROOT / "proto").rglob("*.proto"))
    code = protoc.main(
        [
            "protoc",
            f"-I{ROOT / 'proto'}",
            f"--python_out={tmp_path}",
            f"--pyi_out={tmp_path}",
            f"--grpc_python_out={tmp_path}",
            *[str(ROOT / "proto" / p) for p in protos],
        ]
    )
    assert code == 0
    generated = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*_pb2*"))
    assert generated, "protoc generated nothing"
    for rel in generated:
        committed = ROOT / "base" / rel
        assert committed.exists(), f"{rel} is not committed; run scripts/gen-protos"
        assert committed.read_bytes() == (tmp_path / rel).read_bytes(), (
            f"{rel} is stale against proto/; run scripts/gen-protos"
        )


# Makes every heavy dependency of the daemon unimportable, as on a machine
# where only `pip install memvault` (the light client) was run.
BLOCKER = textwrap.dedent("""
    import sys
    BLOCKED = ("memvaultd", "memvault_server", "torch", "numpy", "lancedb", "pyarrow",
               "sentence_transformers", "transformers", "cryptography", "argon2", "keyring",
               "onnxruntime", "onnx", "tokenizers")
    class Blocker:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ImportError(f"{name} is not part of the light client")
    sys.meta_path.insert(0, Blocker())
""")


def test_the_client_works_without_the_daemons_dependencies(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    script = BLOCKER + textwrap.dedent(f"""
        from memvault import Client
        with Client(socket={str(daemon.socket)!r}) as client:
            memory_id = client.remember("light clients can remember").id
            hits = client.recall("light clients can remember", top_k=1)
            assert hits[0].memory.id == memory_id, hits
        from memvault.cli import main as cli
        import runpy, sys
        sys.argv = ["memvault", "status", "--json"]
        try:
            cli.main()
        except SystemExit as exit:
            assert exit.code in (0, None), exit.code
        print("LIGHT-OK")
    """)
    env = dict(os.environ, MEMVAULT_HOME=str(daemon.home))
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "LIGHT-OK" in done.stdout
    assert '"memory_count"' in done.stdout
