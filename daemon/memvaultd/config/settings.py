"""Daemon settings: embedded defaults, then `config.toml`, then environment.

Every setting has a default that works with no file at all. The file is
`$MEMVAULT_HOME/config.toml` or `~/.config/memvault/config.toml`:

    model = "all-MiniLM-L6-v2"    # a sentence-transformers name or path
    model_runtime = "auto"        # auto | onnx | torch (docs/config.md)
    cache_size = 256              # query embeddings kept (LRU)
    restatement_threshold = 0.7   # lowest cosine at which a new memory may restate an old one
    snapshot_every = 10000        # operations between automatic snapshots (at
                                  # least a tenth of the vault's memories)
    sync_backlog = 100000         # log records kept for the remote while sync is
                                  # stopped or offline (at least twice the vault)
    access_marks_every_hours = 6  # how often a push of recalls' access marks alone
                                  # may go out, at fixed times (docs/sync.md)
    freeze_bound_hours = 72       # another device silent this long is named by
                                  # `sync status` (a frozen view?)
    log_level = "info"
    key_storage = "auto"          # auto | keyring | keyfile
    memory_check = true           # refuse to load a vault larger than the memory
                                  # available (docs/config.md); false: load anyway
    memory_limit_mb = 0           # the most memory the daemon may hold; 0: what the
                                  # machine and its cgroup give

    [decay]                       # half-lives in days
    episodic = 14
    semantic = 90
    procedural = 180

    [fusion]                      # hybrid recall (docs/recall.md)
    method = "score"              # score | rrf
    vector = 1.0                  # weights of the channels in the score fusion
    keyword = 0.5
    topic = 2.0
    context = 0.5                 # share of a hit's session neighbours in its scores
    rrf_k = 60                    # reciprocal-rank fusion, when method = "rrf"
    rrf_vector = 1.0
    rrf_keyword = 1.0
    rrf_topic = 2.0

    [heat]                        # how used a memory is (docs/upkeep.md)
    half_life_days = 7
    ranking_weight = 0            # score x (1 + weight x heat); 0: heat does not rank

    [sweep]                       # the forgetting sweep (docs/upkeep.md)
    threshold = 0.5               # forget when risk > threshold
    min_age_days = 30             # never sweep a younger memory
    every_hours = 24              # background sweep; 0 turns it off

    [trash]                       # forgotten memories, restorable (docs/upkeep.md)
    retention_days = 30           # then purged for good; 0: at the next check

    [consolidation]               # docs/upkeep.md
    min_age_days = 7
    similarity = 0.45             # cosine to join a cluster
    max_importance = 0.5
    summariser = ""               # "module:attribute"; "" = extractive

    [[watch]]                     # a notes folder mirrored into memories (docs/watch.md)
    path = "~/notes"              # relative paths are relative to this file's directory
    glob = "**/*.md"              # which files, relative to path
    topic = "notes"               # topic prefix (default: the folder's name)

`MEMVAULT_DECAY_EPISODIC`, `_SEMANTIC`, `_PROCEDURAL` override the half-lives.
"""

from __future__ import annotations

import math
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from memvault_base.errors import InvalidArgument
from memvaultd.embedding.embedder import DEFAULT_MODEL, RUNTIMES
from memvaultd.model.heat import HeatSettings
from memvaultd.recall.hybrid import FusionSettings
from memvaultd.recall.ranking import DEFAULT_HALF_LIVES_DAYS, half_lives_from_env
from memvaultd.upkeep.consolidation import ConsolidationSettings
from memvaultd.upkeep.sweep import SweepSettings
from memvaultd.upkeep.trash import TrashSettings

# The lowest cosine (all-MiniLM-L6-v2) at which a new memory may reinforce
# an earlier one; whether it does is decided by what differs between the two
# texts (vault/restatement.py): a cosine cannot tell a restatement from a
# changed value ("... is March 3" / "... is April 15" score 0.95). Of the 115
# paraphrases of the labelled set (docs/recall.md), those the word test takes
# as restatements score 0.76 and up; 0.70 keeps them with a margin.
DEFAULT_RESTATEMENT_THRESHOLD = 0.7


@dataclass(frozen=True)
class Config:
    model: str = DEFAULT_MODEL
    # "auto": ONNX Runtime when it imports and reproduces the model, else torch;
    # "onnx": the same, logged as an error when it cannot; "torch": always torch.
    model_runtime: str = "auto"
    cache_size: int = 256
    restatement_threshold: float = DEFAULT_RESTATEMENT_THRESHOLD
    snapshot_every: int = 10_000
    # Log records kept for a remote that lacks them (sync stopped or offline),
    # at least twice the memories, turns and tombstones held: past that the
    # records go with the next snapshot and the next push puts the whole
    # vault again (`vault/snapshots.py`).
    sync_backlog: int = 100_000
    # Access marks with nothing else to carry them wait for the next multiple
    # of this many hours since the epoch: the remote learns at most that the
    # user read something in those hours, not when (docs/threat-model.md).
    access_marks_every_hours: float = 6.0
    # Another device that wrote before and whose newest operation pulled is
    # older than this is named by `sync status`: idle, gone, or hidden by the
    # remote (a frozen view, docs/threat-model.md). 72 h: a laptop left shut
    # over a weekend is not reported.
    freeze_bound_hours: float = 72.0
    log_level: str = "info"
    key_storage: str = "auto"
    # Read at a start, before the load (`vault/footprint.py`).
    memory_check: bool = True
    memory_limit_mb: float = 0
    half_lives: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_HALF_LIVES_DAYS))
    fusion: FusionSettings = field(default_factory=FusionSettings)
    watch: tuple[WatchFolder, ...] = ()
    heat: HeatSettings = field(default_factory=HeatSettings)
    sweep: SweepSettings = field(default_factory=SweepSettings)
    trash: TrashSettings = field(default_factory=TrashSettings)
    consolidation: ConsolidationSettings = field(default_factory=ConsolidationSettings)


@dataclass(frozen=True)
class WatchFolder:
    """One `[[watch]]` entry: `path` absolute, `topic` "" for the folder's name."""

    path: Path
    glob: str = "**/*.md"
    topic: str = ""


def load(path: Path, env: Mapping[str, str] = os.environ) -> Config:
    """The settings from `path` (absent is fine) with env overrides applied.
    Raises InvalidArgument naming the key when a value is wrong."""
    raw: dict[str, Any] = {}
    if path.exists():
        try:
            raw = tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as exc:
            raise InvalidArgument(f"{path}: not valid TOML: {exc}") from exc
    decay = raw.pop("decay", {})
    fusion = _fusion(raw.pop("fusion", {}), path)
    watch = _watch(raw.pop("watch", []), path)
    sections = {name: _numbers(raw.pop(name, {}), cls, name, path)
                for name, cls in _SECTIONS.items()}
    known = {f.name for f in fields(Config)} - {"half_lives", "fusion", "watch", *_SECTIONS}
    unknown = set(raw) - known
    if unknown:
        raise InvalidArgument(f"{path}: unknown setting(s) {', '.join(sorted(unknown))}")
    half_lives = dict(DEFAULT_HALF_LIVES_DAYS)
    for memory_type, days in dict(decay).items():
        if memory_type not in half_lives or not _positive(days):
            raise InvalidArgument(f"{path}: decay.{memory_type} must be a known type "
                                  "with a positive number of days")
        half_lives[memory_type] = float(days)
    try:
        half_lives.update({k: v for k, v in half_lives_from_env(env).items()
                           if f"MEMVAULT_DECAY_{k.upper()}" in env})
    except ValueError as exc:
        raise InvalidArgument(str(exc)) from exc
    config = Config(**raw, half_lives=half_lives, fusion=fusion, watch=watch, **sections)
    _check(config, path)
    return config


def _fusion(raw: dict[str, Any], path: Path) -> FusionSettings:
    known = {f.name: f for f in fields(FusionSettings)}
    for name, value in raw.items():
        if name not in known:
            raise InvalidArgument(f"{path}: unknown setting fusion.{name}")
        if name == "method":
            if value not in ("score", "rrf"):
                raise InvalidArgument(f"{path}: fusion.method must be score or rrf")
        elif not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
            raise InvalidArgument(f"{path}: fusion.{name} must be a number >= 0")
    if raw.get("context", 0) > 1:
        raise InvalidArgument(f"{path}: fusion.context must be within 0..1")
    return FusionSettings(**raw)


# Sections of plain numbers (and strings where the default is one), each
# value checked for type, then against its bounds in `_check`.
_SECTIONS: dict[str, type] = {"heat": HeatSettings, "sweep": SweepSettings,
                              "trash": TrashSettings, "consolidation": ConsolidationSettings}


def _numbers(raw: object, cls: type, section: str, path: Path) -> Any:
    if not isinstance(raw, dict):
        raise InvalidArgument(f"{path}: {section} must be a table")
    defaults = {f.name: f.default for f in fields(cls)}
    for name, value in raw.items():
        if name not in defaults:
            raise InvalidArgument(f"{path}: unknown setting {section}.{name}")
        if isinstance(defaults[name], str):
            if not isinstance(value, str):
                raise InvalidArgument(f"{path}: {section}.{name} must be a string")
        elif (isinstance(value, bool) or not isinstance(value, int | float)
              or not math.isfinite(value) or value < 0):
            raise InvalidArgument(f"{path}: {section}.{name} must be a number >= 0")
    return cls(**raw)


def _watch(raw: object, path: Path) -> tuple[WatchFolder, ...]:
    if not isinstance(raw, list) or not all(isinstance(entry, dict) for entry in raw):
        raise InvalidArgument(f"{path}: watch must be a list of [[watch]] tables")
    folders: list[WatchFolder] = []
    for i, entry in enumerate(raw):
        unknown = sorted(set(entry) - {"path", "glob", "topic"})
        if unknown:
            raise InvalidArgument(f"{path}: unknown setting watch[{i}].{unknown[0]}")
        for name in ("path", "glob", "topic"):
            if not isinstance(entry.get(name, ""), str):
                raise InvalidArgument(f"{path}: watch[{i}].{name} must be a string")
        if not entry.get("path"):
            raise InvalidArgument(f"{path}: watch[{i}].path is required")
        if "glob" in entry and (not entry["glob"] or entry["glob"].startswith("/")):
            raise InvalidArgument(f"{path}: watch[{i}].glob must be a relative pattern")
        folder = (path.parent / Path(entry["path"]).expanduser()).resolve()
        folders.append(WatchFolder(folder, entry.get("glob", "**/*.md"), entry.get("topic", "")))
    return tuple(folders)


def _positive(value: object) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and value > 0


def _check(config: Config, path: Path) -> None:
    if not isinstance(config.cache_size, int) or not 0 <= config.cache_size <= 1_000_000:
        raise InvalidArgument(f"{path}: cache_size must be an integer in 0..1000000")
    if not _positive(config.restatement_threshold) or config.restatement_threshold > 1:
        raise InvalidArgument(f"{path}: restatement_threshold must be in (0, 1]")
    if not isinstance(config.snapshot_every, int) or config.snapshot_every < 1:
        raise InvalidArgument(f"{path}: snapshot_every must be a positive integer")
    if not isinstance(config.sync_backlog, int) or config.sync_backlog < 1:
        raise InvalidArgument(f"{path}: sync_backlog must be a positive integer")
    if not _positive(config.access_marks_every_hours):
        raise InvalidArgument(f"{path}: access_marks_every_hours must be a number of hours "
                              "above 0")
    if not _positive(config.freeze_bound_hours):
        raise InvalidArgument(f"{path}: freeze_bound_hours must be a number of hours above 0")
    if not isinstance(config.memory_check, bool):
        raise InvalidArgument(f"{path}: memory_check must be true or false")
    limit = config.memory_limit_mb
    if (isinstance(limit, bool) or not isinstance(limit, int | float)
            or not math.isfinite(limit) or limit < 0):
        raise InvalidArgument(f"{path}: memory_limit_mb must be a number of MB >= 0")
    if config.key_storage not in ("auto", "keyring", "keyfile"):
        raise InvalidArgument(f"{path}: key_storage must be auto, keyring or keyfile")
    if config.model_runtime not in RUNTIMES:
        raise InvalidArgument(f"{path}: model_runtime must be auto, onnx or torch, "
                              f"not {config.model_runtime!r}")
    if not _positive(config.heat.half_life_days):
        raise InvalidArgument(f"{path}: heat.half_life_days must be a number of days above 0")
    for name, value in (("sweep.threshold", config.sweep.threshold),
                        ("consolidation.similarity", config.consolidation.similarity),
                        ("consolidation.max_importance", config.consolidation.max_importance)):
        if value > 1:
            raise InvalidArgument(f"{path}: {name} must be within 0..1")
    if config.consolidation.summariser and ":" not in config.consolidation.summariser:
        raise InvalidArgument(f"{path}: consolidation.summariser must be \"module:attribute\"")
