"""Install memvault for real use, the way docs/install.md says, and check it works.

    python scripts/check_install.py [--via pip|pipx|uv] [--torch SPEC] [--torch-index URL]
                                    [--find-links DIR] [--keep DIR]

Builds the wheel (`python -m build`, the `dev` extra brings `build`), installs
it with the daemon's extra into a fresh environment (a venv by pip, or a pipx
or uv tool environment), starts that install's `memvaultd` on a temporary
MEMVAULT_HOME and model cache (never the user's own), remembers and recalls
with that install's `memvault`, restarts on a second home sharing the cache,
and prints what it measured: the environment's size, the time to SERVING and
the daemon's resident memory on the first start (which exports the model in a
child process) and on the warm one, and whether the daemon ever mapped torch.
Exits 1 if any step fails. It takes 2-4 minutes, most of it the install.

torch is installed first from the CPU index (`--torch-index`, default the
PyTorch CPU wheels): the registry's plain `torch` is the CUDA build, ~5 GB
more. On a machine with torch's CPU wheel in a local folder, name that folder
with `--find-links` and the exact version with `--torch`, and pass
`--torch-index ""`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
TEXT = "the staging database lives in eu-west-1 and is backed up at 02:00 UTC"
QUERY = "where is the staging database"


def run(command: list[str], env: dict[str, str] | None = None,
        cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    print("$", " ".join(command), file=sys.stderr)
    done = subprocess.run(command, text=True, capture_output=True, check=False, env=env,
                          cwd=cwd)
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): {' '.join(command)}\n{done.stdout}\n{done.stderr}")
    return done


def build(work: Path) -> Path:
    run([sys.executable, "-m", "build", "--wheel", "--outdir", str(work / "dist"), str(ROOT)])
    (wheel,) = (work / "dist").glob("memvault-*.whl")
    return wheel


def install(via: str, wheel: Path, work: Path, torch: str, index: str,
            links: str) -> tuple[Path, Path]:
    """The install's bin folder and the folder that holds all of it."""
    project = f"memvault[daemon] @ {wheel.as_uri()}"
    pip_index = ([f"--index-url={index}", "--extra-index-url=https://pypi.org/simple"]
                 if index else [])
    pip_links = [f"--find-links={links}"] if links else []
    if via == "pip":
        venv = work / "venv"
        run([sys.executable, "-m", "venv", str(venv)])
        run([str(venv / "bin" / "pip"), "install", *pip_index, *pip_links, torch])
        run([str(venv / "bin" / "pip"), "install", *pip_links, project])
        return venv / "bin", venv
    if via == "pipx":
        env = dict(os.environ, PIPX_HOME=str(work / "pipx"), PIPX_BIN_DIR=str(work / "bin"),
                   PIPX_MAN_DIR=str(work / "man"))
        pip_args = " ".join([*(f"--extra-index-url={index}" for _ in [index] if index),
                             *pip_links])
        # pipx runs uv instead of pip where it finds uv, and uv reads neither
        # --pip-args' index nor pip's config: that took the 5.3 GB CUDA build.
        run(["pipx", "install", "--backend", "pip", "--python", sys.executable,
             "--preinstall", torch,
             *([f"--pip-args={pip_args}"] if pip_args else []), project], env=env)
        return work / "bin", work / "pipx"
    env = dict(os.environ, UV_TOOL_DIR=str(work / "uv-tools"), UV_TOOL_BIN_DIR=str(work / "bin"),
               UV_CACHE_DIR=str(work / "uv-cache"))
    uv_index = ["--torch-backend=cpu"] if index == CPU_INDEX else (
        [f"--index={index}"] if index else [])
    run(["uv", "tool", "install", "--python", sys.executable, *uv_index,
         *([f"--find-links={links}"] if links else []), "--with", torch, project], env=env)
    return work / "bin", work / "uv-tools"


def size_mb(folder: Path) -> float:
    return sum(path.lstat().st_size for path in folder.rglob("*")) / 2**20


class Daemon:
    """The installed memvaultd on one home, as a user starts it."""

    def __init__(self, bin_dir: Path, home: Path, cache: Path) -> None:
        home.mkdir(mode=0o700, parents=True)
        self.bin, self.home = bin_dir, home
        # Nothing of this checkout: no PYTHONPATH, a neutral working directory.
        self.env = {key: value for key, value in os.environ.items()
                    if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
        self.env.update(MEMVAULT_HOME=str(home), MEMVAULT_CACHE_DIR=str(cache),
                        MEMVAULT_PASSPHRASE="check the install with this passphrase",
                        PYTHON_KEYRING_BACKEND="keyring.backends.fail.Keyring",
                        HF_HUB_OFFLINE="1")
        self.log = home.parent / f"{home.name}.log"

    def start(self) -> tuple[int, float]:
        started = time.monotonic()
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen([str(self.bin / "memvaultd")], env=self.env,
                                         cwd=self.home, stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=log)
        while "ready:" not in self.log.read_text(errors="replace"):
            if self.proc.poll() is not None or time.monotonic() - started > 300:
                sys.exit(f"memvaultd did not become ready:\n{self.log.read_text()}")
            time.sleep(0.05)
        return self.proc.pid, time.monotonic() - started

    def cli(self, *args: str) -> str:
        return run([str(self.bin / "memvault"), *args], env=self.env, cwd=self.home).stdout

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        if self.proc.wait(60) != 0:
            sys.exit(f"memvaultd stopped with {self.proc.returncode}:\n{self.log.read_text()}")


def resident_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    found = re.search(r"VmRSS:\s+(\d+) kB", status)
    assert found is not None
    return int(found.group(1)) / 1024


def maps_torch(pid: int) -> bool:
    return "libtorch" in Path(f"/proc/{pid}/maps").read_text()


def check(bin_dir: Path, work: Path) -> dict[str, object]:
    cache = work / "cache"
    first = Daemon(bin_dir, work / "home-one", cache)
    pid, cold_s = first.start()
    remembered = first.cli("remember", TEXT, "--topic", "infra.databases").strip()
    hits = json.loads(first.cli("recall", QUERY, "--json"))
    if not hits or TEXT not in json.dumps(hits):
        sys.exit(f"recall did not find the memory: {hits}")
    figures: dict[str, object] = {
        "first start to ready, s": round(cold_s, 1),
        "first start, resident MB": round(resident_mb(pid), 1),
        "first start maps torch": maps_torch(pid),
        "export, s": float(re.findall(r"exported the model to \S+ in ([\d.]+) s",
                                      first.log.read_text())[0]),
        "remembered": remembered,
    }
    first.stop()
    second = Daemon(bin_dir, work / "home-two", cache)
    pid, warm_s = second.start()
    second.cli("recall", QUERY, "--json")
    figures |= {"warm start to ready, s": round(warm_s, 1),
                "warm start, resident MB": round(resident_mb(pid), 1),
                "warm start maps torch": maps_torch(pid),
                "warm start exported again": "exported the model" in second.log.read_text()}
    second.stop()
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--via", choices=["pip", "pipx", "uv"], default="pip")
    parser.add_argument("--torch", default="torch", help="torch's requirement (default: torch)")
    parser.add_argument("--torch-index", default=CPU_INDEX,
                        help='where the CPU build comes from ("" for the usual indexes)')
    parser.add_argument("--find-links", default="", help="a folder of wheels to install from")
    parser.add_argument("--keep", type=Path, help="work here and keep it (default: a temp dir)")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="memvault-install-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        started = time.monotonic()
        wheel = build(work)
        built = time.monotonic()
        bin_dir, env_dir = install(args.via, wheel, work, args.torch, args.torch_index,
                                   args.find_links)
        figures: dict[str, object] = {
            "via": args.via, "wheel, kB": round(wheel.stat().st_size / 1024),
            "build, s": round(built - started), "install, s": round(time.monotonic() - built),
            "environment, MB": round(size_mb(env_dir)),
            # torch's CUDA build brings these: ~5 GB the daemon has no use for.
            "CUDA packages": len(list(env_dir.glob("**/site-packages/nvidia_*.dist-info")))}
        figures |= check(bin_dir, work)
        print(json.dumps(figures, indent=2))
        bad = [key for key in ("CUDA packages", "first start maps torch", "warm start maps torch",
                               "warm start exported again") if figures[key]]
        return 1 if bad else 0
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
