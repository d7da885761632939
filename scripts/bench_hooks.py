#!/usr/bin/env python3
"""The Claude Code hooks, measured against a real memvaultd (docs/hooks.md).

    .venv/bin/python scripts/bench_hooks.py [--runs 20]

1. The prompt hook's relevance threshold. The memories of
   `tests/data/claude_code/prompt_relevance.json` (40, a developer's: their
   projects' conventions and a few personal facts) are stored in a fresh
   daemon, each under its own topic so that none is merged into another.
   Each of its 40 prompts (26 with the memories that would help answer it,
   14 of an unrelated task with none) is recalled as the hook recalls it
   (top 3, no threshold). For each threshold t, a hit counts as injected
   when its relevance (`breakdown.fusion`) is at least t: precision is the share of injected hits
   that are relevant, recall the share of (prompt, relevant memory) pairs
   injected, and "noise" the share of the 14 unrelated prompts that get any
   memory at all. The threshold chosen is the one with the best F0.5, which
   weighs precision twice as much as recall: an irrelevant memory in the
   context costs tokens and can mislead the agent, while a missed one
   leaves the agent where it was without memvault.

2. What session start's recall by a project's name finds: the relevance
   of the memories a recall for "orbit" returns, those that name the
   project (marked *) and those that do not.

3. Each hook's time through the real CLI (`python -m memvault.cli.main
   --home H hooks run EVENT`, the example inputs of tests/data/claude_code
   with their paths pointed at a copy of the transcript), `--runs` times
   each: median and maximum wall time. Each Stop is given two new lines of
   transcript first (a prompt and its answer), as a session gives it. For
   scale, the time of `python -c "import memvault.cli.main"` and of a bare
   interpreter.

The last line of output is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from memvault import Client

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "claude_code"
THRESHOLDS = [round(0.01 * i, 2) for i in range(30, 71)]


def start_daemon(home: Path) -> tuple[subprocess.Popen[bytes], dict[str, str]]:
    env = dict(os.environ, MEMVAULT_HOME=str(home), MEMVAULT_PASSPHRASE="bench passphrase",
               PYTHON_KEYRING_BACKEND="keyring.backends.fail.Keyring",
               HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    home.mkdir(parents=True)
    with open(home / "daemon.log", "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "memvaultd.app.main"], env=env,
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    with Client(home / "run" / "memvault.sock") as client:
        client.wait_ready(timeout=120)
    return proc, env


def thresholds(client: Client) -> dict[str, Any]:
    data = json.loads((DATA / "prompt_relevance.json").read_text())
    keys = list(data["memories"])
    results = client.remember_batch([{"text": data["memories"][k], "topic": f"bench.{k}",
                                      "new": True} for k in keys])
    key_of = {r.id: k for r, k in zip(results, keys, strict=True)}
    seen: list[tuple[float, bool, int]] = []  # (relevance, relevant, prompt index)
    wanted = 0
    for i, case in enumerate(data["prompts"]):
        wanted += len(case["relevant"])
        for hit in client.recall(case["prompt"], top_k=3, mark_accessed=False):
            seen.append((hit.breakdown.fusion, key_of[hit.memory.id] in case["relevant"], i))
    unrelated = {i for i, case in enumerate(data["prompts"]) if not case["relevant"]}
    rows = []
    for t in THRESHOLDS:
        injected = [(rel, i) for relevance, rel, i in seen if relevance >= t]
        good = sum(rel for rel, _ in injected)
        precision = good / len(injected) if injected else 1.0
        recall = good / wanted
        beta2 = 0.25
        f05 = ((1 + beta2) * precision * recall / (beta2 * precision + recall)
               if precision + recall else 0.0)
        noise = len({i for _, i in injected if i in unrelated}) / len(unrelated)
        rows.append({"threshold": t, "precision": round(precision, 3),
                     "recall": round(recall, 3), "f0.5": round(f05, 3),
                     "noise": round(noise, 3), "injected": len(injected)})
    best = max(rows, key=lambda r: (r["f0.5"], r["threshold"]))
    project = [{"relevance": round(hit.breakdown.fusion, 3),
                "names_project": "orbit" in hit.memory.text.lower(), "text": hit.memory.text}
               for hit in client.recall("orbit", top_k=10, mark_accessed=False)]
    return {"rows": rows, "best": best, "project_recall": project,
            "memories": len(keys), "prompts": len(data["prompts"]),
            "unrelated_prompts": len(unrelated), "relevant_pairs": wanted}


def hook_input(name: str, transcript: Path, cwd: Path) -> str:
    value = json.loads((DATA / f"{name}.json").read_text())
    value.update(transcript_path=str(transcript), cwd=str(cwd))
    return json.dumps(value)


def timed(argv: list[str], stdin: str, env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, input=stdin, capture_output=True, text=True, env=env,
                          check=False)
    took = time.perf_counter() - start
    if done.returncode != 0 or "skipped" in done.stdout:
        raise RuntimeError(f"{argv} failed: {done.stdout} {done.stderr}")
    return took


def latencies(home: Path, env: dict[str, str], runs: int, work: Path) -> dict[str, Any]:
    transcript = work / "session.jsonl"
    transcript.write_bytes((DATA / "transcript.jsonl").read_bytes())
    extra = (DATA / "transcript_more.jsonl").read_bytes()
    cli = [sys.executable, "-m", "memvault.cli.main", "--home", str(home), "hooks", "run"]
    out: dict[str, Any] = {}
    for name, event in (("session_start", "session-start"), ("user_prompt_submit", "prompt"),
                        ("stop", "stop"), ("pre_compact", "pre-compact")):
        stdin = hook_input(name, transcript, work)
        times = []
        for _ in range(runs):
            if event in ("stop", "pre-compact"):
                with transcript.open("ab") as file:
                    file.write(extra)
            times.append(timed([*cli, event], stdin, env))
        out[event] = {"median_s": round(statistics.median(times), 3),
                      "max_s": round(max(times), 3)}
    for label, argv in (("import memvault.cli.main",
                         [sys.executable, "-c", "import memvault.cli.main"]),
                        ("bare interpreter", [sys.executable, "-c", "pass"])):
        times = [timed(argv, "", env) for _ in range(runs)]
        out[label] = {"median_s": round(statistics.median(times), 3),
                      "max_s": round(max(times), 3)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-hooks-") as tmp:
        work = Path(tmp)
        home = work / "home"
        proc, env = start_daemon(home)
        try:
            with Client(home / "run" / "memvault.sock") as client:
                quality = thresholds(client)
            timing = latencies(home, env, args.runs, work)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
    print(f"{'threshold':>9} {'precision':>9} {'recall':>6} {'F0.5':>5} {'noise':>5} injected")
    for row in quality["rows"]:
        print(f"{row['threshold']:>9.2f} {row['precision']:>9.3f} {row['recall']:>6.3f} "
              f"{row['f0.5']:>5.3f} {row['noise']:>5.3f} {row['injected']:>8}")
    print(f"best F0.5 at {quality['best']['threshold']}")
    print("recall 'orbit':")
    for hit in quality["project_recall"]:
        print(f"  {hit['relevance']:.3f} {'*' if hit['names_project'] else ' '} {hit['text']}")
    for label, figures in timing.items():
        print(f"{label:>26}: median {figures['median_s']:.3f} s, max {figures['max_s']:.3f} s")
    print(json.dumps({"thresholds": quality, "latency": timing}))


if __name__ == "__main__":
    main()
