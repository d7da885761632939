"""The project a working directory belongs to: its name and its git remote.

The name is that of the repository's top directory (a session started in a
subdirectory is still that project), else the working directory's own. The
remote is `origin`'s URL as `host/owner/repo`, with any user or password of
the URL dropped: it is written into memories' payloads, and a token in a
clone URL (`https://x:TOKEN@host/...`) must never travel with them.

`git` answers both in about 3 ms each; it is given 0.5 s, and a directory
that is not a repository, or a machine without git, simply has no remote.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

__all__ = ["Project", "normalized_remote", "of"]

_GIT_TIMEOUT_S = 0.5
_NOT_IN_A_SCOPE = re.compile(r"[^A-Za-z0-9._-]+")
_SCOPE_NAME_MAX = 64
# git's scp-like form: user@host:owner/repo.git
_SCP_LIKE = re.compile(r"^(?:[^@/\s]+@)?(?P<host>[^:/\s]+):(?P<path>[^\s]+)$")


@dataclass(frozen=True)
class Project:
    name: str
    remote: str = ""

    @property
    def label(self) -> str:
        return f"{self.name}, {self.remote}" if self.remote else self.name

    @property
    def query(self) -> str:
        """What a recall for this project asks: its name and its remote's path."""
        words = [self.name]
        if self.remote:
            words.append(self.remote.split("/", 1)[-1])
        return " ".join(dict.fromkeys(w for w in words if w))

    @property
    def scope(self) -> str:
        """The scope a hook of this project works in, `project:NAME`: its name
        with what a scope name may not hold (docs/scopes.md) made `-`;
        `user` for a name with nothing left (the root directory)."""
        name = _NOT_IN_A_SCOPE.sub("-", self.name).lstrip("._-")[:_SCOPE_NAME_MAX]
        return f"project:{name}" if name else "user"

    def payload(self) -> dict[str, Any]:
        """What a memory the hooks store says of its project."""
        out: dict[str, Any] = {"project": self.name}
        if self.remote:
            out["git_remote"] = self.remote
        return out

    def filter(self) -> dict[str, Any]:
        """The memories the hooks stored for this project: by remote when it
        has one (two clones share it; two projects named `app` do not)."""
        if self.remote:
            return {"payload.git_remote": self.remote}
        return {"payload.project": self.name}


def of(cwd: str) -> Project:
    """The project of working directory `cwd`."""
    where = Path(cwd or ".").expanduser()
    top = _git(where, "rev-parse", "--show-toplevel")
    name = Path(top).name if top else where.absolute().name
    remote = normalized_remote(_git(where, "config", "--get", "remote.origin.url"))
    return Project(name or "/", remote)


def normalized_remote(url: str) -> str:
    """`host/owner/repo` of a git remote URL, "" for none; never its credentials."""
    url = url.strip()
    if not url:
        return ""
    if "://" in url:
        parts = urlsplit(url)
        host, path = parts.hostname or "", parts.path
    else:
        match = _SCP_LIKE.match(url)
        if match is None:
            return ""  # a local path: no host to name
        host, path = match["host"], match["path"]
    path = path.strip("/").removesuffix(".git")
    return f"{host}/{path}" if host and path else ""


def _git(where: Path, *args: str) -> str:
    try:
        done = subprocess.run(["git", "-C", str(where), *args], capture_output=True,
                              text=True, timeout=_GIT_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""
