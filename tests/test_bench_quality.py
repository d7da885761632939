"""scripts/bench_quality.py's leave-one-conversation-out: each conversation
is scored with the setting that did best on the others, never on itself."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "bench_quality.py"


def _bench() -> ModuleType:
    """The script, loaded by its path (scripts/ is no package)."""
    spec = importlib.util.spec_from_file_location("bench_quality", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_quality"] = module
    spec.loader.exec_module(module)
    return module


def test_each_conversation_is_scored_with_the_setting_best_on_the_others() -> None:
    bq = _bench()
    question = bq.Question("q", 4, frozenset({"D1:1"}))
    conversations = [bq.Conversation(name, [], [question, question])
                     for name in ("a", "b", "c")]
    # Point 0 hits everything in a and b and nothing in c; point 1 only c.
    point0 = {k: [True, True, True, True, False, False] for k in bq.KS}
    point1 = {k: [False, False, False, False, True, True] for k in bq.KS}
    hits, chosen = bq.leave_one_out(conversations, [point0, point1])
    # Held out c, point 0 has a and b against nothing; held out a (or b),
    # the two tie on one conversation each and the earlier point wins.
    assert chosen == [0, 0, 0]
    assert hits[5] == [True, True, True, True, False, False]
    # With c's own hits out of the picture, c never gets to choose point 1.
    point1 = {k: [False, False, True, True, True, True] for k in bq.KS}
    hits, chosen = bq.leave_one_out(conversations, [point0, point1])
    # Without a: point 1 has b and c, point 0 only b. Without b: a against c, a
    # tie. Without c: point 0 has a and b, point 1 only b.
    assert chosen == [1, 0, 0]
    assert hits[10] == [False, False, True, True, False, False]


def test_the_grid_holds_the_defaults() -> None:
    bq = _bench()
    from memvaultd.recall.hybrid import FusionSettings

    defaults = FusionSettings()
    assert {name: getattr(defaults, name) for name in bq.GRID} in bq.grid_points()
