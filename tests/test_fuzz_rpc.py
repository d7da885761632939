"""Hostile requests to every RPC of memvault.v1.Memory, against one real daemon.

Hypothesis builds requests with random and huge strings, NaN and infinities,
enormous numbers, unknown type/tier/mode names, and deep or wide filters;
raw protobuf bytes carry what the Python stubs cannot (invalid UTF-8,
corrupt wire format). Every call has a deadline. The daemon must answer each
with OK or a clear refusal (INVALID_ARGUMENT, NOT_FOUND, RESOURCE_EXHAUSTED),
never INTERNAL or UNKNOWN, never hang or die, and a canary memory written
first must read back unchanged at the end.

Forget is fuzzed with `dry_run` when it is given a filter: a filter such as
`{}` matches every memory, and forgetting the canary on request is correct.
EmptyTrash is called for real: the canary is never forgotten, so never in it.
"""

from __future__ import annotations

import base64
import json
import math
import os
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memvault_base.limits import MAX_MESSAGE
from memvault_base.v1 import memory_pb2 as pb
from memvault_base.v1 import memory_pb2_grpc as pb_grpc

from .daemon_process import DaemonProcess

DEADLINE_S = 60.0
ALLOWED = {grpc.StatusCode.OK, grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND,
           grpc.StatusCode.RESOURCE_EXHAUSTED}
# scripts/fuzz_long sets MEMVAULT_FUZZ_SCALE (20: 500 random examples per RPC).
SCALE = int(os.environ.get("MEMVAULT_FUZZ_SCALE", "1"))
FUZZ = settings(max_examples=25 * SCALE, deadline=None, derandomize=SCALE == 1,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow, HealthCheck.data_too_large])
TEN_MB = "m" * (10 * 1024 * 1024)


class Target:
    def __init__(self, proc: DaemonProcess) -> None:
        self.proc = proc
        self.channel = grpc.insecure_channel(
            f"unix://{proc.socket}", options=[("grpc.max_send_message_length", MAX_MESSAGE),
                                              ("grpc.max_receive_message_length", MAX_MESSAGE)])
        self.stub = pb_grpc.MemoryStub(self.channel)  # type: ignore[no-untyped-call]
        self.calls = 0
        self.canary_id = ""

    def code(self, method: str, request: object) -> grpc.StatusCode:
        """The status of one call; streams are read to the end."""
        self.calls += 1
        call = getattr(self.stub, method)
        try:
            reply = call(request, timeout=DEADLINE_S)
            if method in ("Export", "Events"):
                for _ in reply:
                    pass
        except grpc.RpcError as err:
            return err.code()
        return grpc.StatusCode.OK

    def raw(self, method: str, payload: bytes) -> grpc.StatusCode:
        self.calls += 1
        call: grpc.UnaryUnaryMultiCallable[bytes, bytes] = self.channel.unary_unary(
            f"/memvault.v1.Memory/{method}")
        try:
            call(payload, timeout=DEADLINE_S)
        except grpc.RpcError as err:
            return err.code()
        return grpc.StatusCode.OK


CANARY = pb.MemoryInput(text="canary: the backup passphrase hint is the first cat's name",
                        topic_key="fuzz.canary", payload_json='{"k": [1, 2.5, "ü"]}',
                        tags=["canary"], category="fuzz", importance=0.7, tier="working")


def _canary_fields(record: pb.MemoryRecord) -> tuple[object, ...]:
    return (record.id, record.text, record.topic_key, json.loads(record.payload_json),
            list(record.tags), record.category, record.importance, record.tier, record.type,
            record.created_at, tuple(record.vector))


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    home = tmp_path_factory.mktemp("fuzz") / "home"
    with DaemonProcess(home).start() as proc:
        target = Target(proc)
        target.canary_id = target.stub.Remember(pb.RememberRequest(memory=CANARY),
                                                timeout=DEADLINE_S).id
        before = target.stub.Get(pb.GetRequest(id=target.canary_id, include_vector=True),
                                 timeout=DEADLINE_S).memory
        yield target
        assert proc.proc is not None and proc.proc.poll() is None, f"daemon died:\n{proc.log}"
        after = target.stub.Get(pb.GetRequest(id=target.canary_id, include_vector=True),
                                timeout=DEADLINE_S).memory
        assert _canary_fields(after) == _canary_fields(before)
        assert proc.health() == "SERVING"
        target.channel.close()
        print(f"fuzzed {target.calls} requests")
        assert proc.stop() == 0


def _check(code: grpc.StatusCode, what: str) -> None:
    assert code in ALLOWED, f"{what}: answered {code.name}"


# -- strategies ----------------------------------------------------------------

floats = st.floats(allow_nan=True, allow_infinity=True, width=64)
float32s = st.floats(allow_nan=True, allow_infinity=True, width=32)
strings = st.one_of(st.text(max_size=64), st.text(min_size=500, max_size=2000),
                    st.sampled_from(["", " ", "\x00", "\u202e", "a" * 70_000, "💾" * 9000]))
names = st.one_of(st.sampled_from(["", "semantic", "episodic", "procedural", "fact", "FACT",
                                   "task", "working", "long_term", "archived", "hybrid",
                                   "vector", "keyword", "bogus", "NaN", "-1", "\x00"]),
                  st.text(max_size=20))
vectors = st.one_of(st.just([]), st.lists(float32s, min_size=384, max_size=384),
                    st.lists(float32s, max_size=600), st.just([0.0] * 384),
                    st.just([math.nan] * 384), st.just([3.4e38] * 384))
uint32 = st.integers(0, 2**32 - 1)
uint64 = st.integers(0, 2**64 - 1)

json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70),
                      st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=10))
json_values = st.recursive(json_leaf, lambda kids: st.one_of(
    st.lists(kids, max_size=5), st.dictionaries(st.text(max_size=8), kids, max_size=5)),
    max_leaves=30)
field_names = st.sampled_from(["category", "tags", "importance", "created_at", "topic_key",
                               "payload.x", "payload", "AND", "OR", "NOT", "bogus", "text"])
operators = st.sampled_from(["eq", "ne", "contains", "in", "nin", "gt", "gte", "lt", "lte",
                             "exists", "regex", ""])
filter_nodes = st.recursive(
    st.one_of(st.dictionaries(field_names, json_values, max_size=3),
              st.dictionaries(field_names, st.dictionaries(operators, json_values, max_size=3),
                              max_size=3)),
    lambda kids: st.one_of(st.fixed_dictionaries({"AND": st.lists(kids, max_size=4)}),
                           st.fixed_dictionaries({"OR": st.lists(kids, max_size=4)}),
                           st.fixed_dictionaries({"NOT": kids})),
    max_leaves=20)


def _deep(n: int) -> str:
    return '{"NOT": ' * n + '{"category": "x"}' + "}" * n


filters = st.one_of(
    filter_nodes.map(json.dumps), strings,
    st.sampled_from(["NaN", '{"importance": {"gt": NaN}}', '{"importance": Infinity}', "[]",
                     "null", '{"a": 1, "a": 2}', "1" * 5000, _deep(40), _deep(100_000),
                     json.dumps({"OR": [{"category": str(i)} for i in range(5000)]}),
                     json.dumps({"tags": {"in": list(range(100_000))}})]))

memory_inputs = st.builds(
    pb.MemoryInput, text=strings, type=names, topic_key=strings,
    payload_json=st.one_of(json_values.map(json.dumps), strings), entity=strings,
    tags=st.lists(strings, max_size=80), category=strings,
    importance=st.one_of(st.none(), floats), session_id=strings, source=strings, tier=names,
    expires_at=floats, supersedes=strings, vector=vectors)


# -- one test per RPC ----------------------------------------------------------------


@FUZZ
@given(memory=memory_inputs)
def test_remember(target: Target, memory: pb.MemoryInput) -> None:
    _check(target.code("Remember", pb.RememberRequest(memory=memory)), "Remember")


@FUZZ
@given(memories=st.lists(memory_inputs, max_size=6))
def test_remember_batch(target: Target, memories: list[pb.MemoryInput]) -> None:
    _check(target.code("RememberBatch", pb.RememberBatchRequest(memories=memories)),
           "RememberBatch")


@FUZZ
@given(query=strings, top_k=uint32, min_score=st.one_of(st.none(), floats), filter_json=filters,
       vector=vectors, mode=names, types=st.lists(names, max_size=4), topic=strings,
       tiers=st.lists(names, max_size=4), max_tokens=uint32, offset=uint32,
       flags=st.lists(st.booleans(), min_size=4, max_size=4),
       band=st.one_of(names, st.sampled_from(["hot", "warm", "cold", "frozen"])))
def test_recall(target: Target, query: str, top_k: int, min_score: float | None,
                filter_json: str, vector: list[float], mode: str, types: list[str], topic: str,
                tiers: list[str], max_tokens: int, offset: int, flags: list[bool],
                band: str) -> None:
    request = pb.RecallRequest(
        query=query, top_k=top_k, filter_json=filter_json, query_vector=vector, mode=mode,
        types=types, topic_key=topic, session_id=topic, source=query[:10], tiers=tiers,
        include_superseded=flags[0], max_tokens=max_tokens, offset=offset,
        mark_accessed=flags[1], include_vectors=flags[2], include_turns=flags[3], band=band)
    if min_score is not None:
        request.min_score = min_score
    _check(target.code("Recall", request), "Recall")


@FUZZ
@given(memory_id=strings, include_vector=st.booleans())
def test_get_and_reinforce(target: Target, memory_id: str, include_vector: bool) -> None:
    _check(target.code("Get", pb.GetRequest(id=memory_id, include_vector=include_vector)), "Get")
    _check(target.code("Reinforce", pb.ReinforceRequest(id=memory_id)), "Reinforce")
    _check(target.code("ResolveId", pb.ResolveIdRequest(id=memory_id)), "ResolveId")


@FUZZ
@given(memory_id=strings, filter_json=filters, by=strings, purge=st.booleans())
def test_forget(target: Target, memory_id: str, filter_json: str, by: str, purge: bool) -> None:
    by_id = pb.ForgetRequest(id=memory_id, by=by, purge=purge)
    _check(target.code("Forget", by_id), "Forget by id")
    by_filter = pb.ForgetRequest(id=memory_id[:1], filter_json=filter_json, dry_run=True,
                                 by=by, purge=purge)
    _check(target.code("Forget", by_filter), "Forget by filter")


@FUZZ
@given(ids=st.lists(strings, max_size=4), every=st.booleans())
def test_the_trash(target: Target, ids: list[str], every: bool) -> None:
    # Whatever the fuzzing forgot is in the trash: restoring it is correct.
    _check(target.code("ListTrash", pb.ListTrashRequest()), "ListTrash")
    _check(target.code("RestoreFromTrash", pb.RestoreFromTrashRequest(ids=ids, all=every)),
           "RestoreFromTrash")
    _check(target.code("EmptyTrash", pb.EmptyTrashRequest()), "EmptyTrash")


@FUZZ
@given(memory_id=st.one_of(strings, st.just("")), memory=memory_inputs,
       fields=st.lists(st.one_of(names, st.sampled_from(
           ["text", "importance", "tags", "payload_json", "expires_at", "vector", "id"])),
           max_size=5), canary=st.booleans())
def test_update_and_supersede(target: Target, memory_id: str, memory: pb.MemoryInput,
                              fields: list[str], canary: bool) -> None:
    # Aimed at the canary only with fields it refuses, so a valid update never lands on it.
    target_id = target.canary_id if canary else memory_id
    if canary:
        fields = [*fields, "no_such_field"]
    _check(target.code("Update", pb.UpdateRequest(id=target_id, memory=memory, fields=fields)),
           "Update")
    if not canary:
        _check(target.code("Supersede", pb.SupersedeRequest(id=memory_id, memory=memory)),
               "Supersede")


@FUZZ
@given(filter_json=filters)
def test_list_topics_and_entities(target: Target, filter_json: str) -> None:
    _check(target.code("ListTopics", pb.ListRequest(filter_json=filter_json)), "ListTopics")
    _check(target.code("ListEntities", pb.ListRequest(filter_json=filter_json)), "ListEntities")


# Page tokens: base64 of JSON that is not a token, of a token's shape with
# hostile values, and of nothing at all.
tokens = st.one_of(strings, json_values.map(lambda v: base64.urlsafe_b64encode(
    json.dumps(v).encode()).decode()), st.builds(
    lambda key, now, memory_id: base64.urlsafe_b64encode(json.dumps(
        {"v": 1, "sort": "created", "asc": False, "key": key, "id": memory_id,
         "now": now}).encode()).decode(), floats, floats, strings))


@FUZZ
@given(filter_json=filters, sort=names, limit=st.integers(0, 2**32 - 1),
       offset=st.integers(0, 2**32 - 1), token=tokens, band=names, tiers=st.lists(names),
       types=st.lists(names), text=strings, facets=st.booleans())
def test_list_memories(target: Target, filter_json: str, sort: str, limit: int, offset: int,
                       token: str, band: str, tiers: list[str], types: list[str], text: str,
                       facets: bool) -> None:
    _check(target.code("ListMemories", pb.ListMemoriesRequest(
        filter_json=filter_json, sort=sort, limit=limit, offset=offset, page_token=token,
        band=band, tiers=tiers, types=types, topic_key=text, entity=text, tag=text,
        source=text, session_id=text, include_facets=facets)), "ListMemories")


@FUZZ
@given(session=strings, turns=st.lists(st.builds(
    pb.Turn, session_id=strings, speaker=strings, text=strings, at=floats, id=strings,
    payload_json=st.one_of(json_values.map(json.dumps), strings)), max_size=5))
def test_append_turns(target: Target, session: str, turns: list[pb.Turn]) -> None:
    _check(target.code("AppendTurns", pb.AppendTurnsRequest(session_id=session, turns=turns)),
           "AppendTurns")


records = st.builds(
    pb.MemoryRecord, id=strings, text=strings, type=names, topic_key=strings,
    payload_json=st.one_of(json_values.map(json.dumps), strings), tags=st.lists(strings,
                                                                                max_size=4),
    importance=floats, tier=names, created_at=floats, last_reinforced_at=floats,
    reinforce_count=uint64, access_count=uint64, expires_at=floats, superseded_by=strings,
    supersedes=strings, vector=vectors, last_accessed_at=floats, protected=st.booleans(),
    consolidated_from=st.lists(strings, max_size=3), consolidated_into=strings)


@FUZZ
@given(memories=st.lists(records, max_size=4))
def test_import(target: Target, memories: list[pb.MemoryRecord]) -> None:
    _check(target.code("Import", pb.ImportRequest(memories=memories)), "Import")


@FUZZ
@given(include_vectors=st.booleans())
def test_export_and_status(target: Target, include_vectors: bool) -> None:
    _check(target.code("Export", pb.ExportRequest(include_vectors=include_vectors)), "Export")
    _check(target.code("Status", pb.StatusRequest(include_bands=include_vectors)), "Status")


@FUZZ
@given(dry_run=st.booleans(), threshold=st.one_of(st.none(), floats), scope=names,
       min_age=st.one_of(st.none(), floats), session=strings)
def test_sweep_and_consolidate(target: Target, dry_run: bool, threshold: float | None,
                               scope: str, min_age: float | None, session: str) -> None:
    # The canary (importance 0.7, young) is neither sweepable nor a candidate.
    sweep = pb.SweepRequest(dry_run=dry_run)
    if threshold is not None:
        sweep.threshold = threshold
    _check(target.code("Sweep", sweep), "Sweep")
    consolidate = pb.ConsolidateRequest(scope=scope, dry_run=dry_run, session_id=session)
    if min_age is not None:
        consolidate.min_age_days = min_age
    _check(target.code("Consolidate", consolidate), "Consolidate")


def test_events_with_unknown_types(target: Target) -> None:
    for types in ([], ["bogus", "", "\x00" * 1000], ["hit"] * 10_000):
        stream = target.stub.Events(pb.EventsRequest(types=types), timeout=1.0)
        with pytest.raises(grpc.RpcError) as caught:
            for _ in stream:
                pass
        assert caught.value.code() in ALLOWED | {grpc.StatusCode.DEADLINE_EXCEEDED}
        target.calls += 1


def test_ten_megabyte_texts_are_refused(target: Target) -> None:
    big = pb.MemoryInput(text=TEN_MB)
    requests = {
        "Remember": pb.RememberRequest(memory=big),
        "RememberBatch": pb.RememberBatchRequest(memories=[big, big]),
        "Recall": pb.RecallRequest(query=TEN_MB),
        "Update": pb.UpdateRequest(id=target.canary_id, memory=big, fields=["text"]),
        "Supersede": pb.SupersedeRequest(id=target.canary_id, memory=big),
        "AppendTurns": pb.AppendTurnsRequest(session_id="s", turns=[pb.Turn(text=TEN_MB)]),
        "ListTopics": pb.ListRequest(filter_json=TEN_MB),
        "Forget": pb.ForgetRequest(filter_json=TEN_MB, dry_run=True),
        "Import": pb.ImportRequest(memories=[pb.MemoryRecord(id="a" * 32, text=TEN_MB)]),
    }
    for method, request in requests.items():
        code = target.code(method, request)
        assert code in {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED}, (
            f"{method}: {code.name}")
    payload = pb.MemoryInput(text="small", payload_json=json.dumps({"k": TEN_MB}))
    assert target.code("Remember", pb.RememberRequest(memory=payload)) in {
        grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED}
    # Beyond the daemon's 64 MiB message limit: refused unread.
    huge = pb.RememberBatchRequest(memories=[big] * 7)
    assert target.code("RememberBatch", huge) == grpc.StatusCode.RESOURCE_EXHAUSTED


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field (wire type 2); lengths under 2**14."""
    length = len(payload)
    varint = bytes([length]) if length < 0x80 else bytes([0x80 | (length & 0x7F), length >> 7])
    return bytes([(number << 3) | 2]) + varint + payload


INVALID_UTF8 = [b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"ok\x80"]


def test_invalid_utf8_and_corrupt_wire_format_are_invalid_argument(target: Target) -> None:
    cases: list[tuple[str, bytes]] = []
    for bad in INVALID_UTF8:
        cases += [
            ("Remember", _field(1, _field(1, bad))),                 # memory.text
            ("Remember", _field(1, _field(1, b"x") + _field(4, bad))),  # memory.payload_json
            ("Recall", _field(1, bad)),                               # query
            ("Recall", _field(1, b"q") + _field(4, bad)),             # filter_json
            ("Get", _field(1, bad)),
            ("Forget", _field(2, bad)),
            ("ListTopics", _field(1, bad)),
        ]
    cases += [("Remember", b"\xff\xff\xff"), ("Recall", b"\x0a\x05ab"), ("Get", b"\x08")]
    codes = {f"{method} {payload!r}": target.raw(method, payload) for method, payload in cases}
    wrong = {what: code.name for what, code in codes.items()
             if code != grpc.StatusCode.INVALID_ARGUMENT}
    assert not wrong, wrong


def test_raw_bytes_never_take_the_daemon_down(target: Target) -> None:
    """Whatever the answer to undecodable bytes, the daemon keeps serving."""
    for method in ("Remember", "Recall", "Import", "Update", "AppendTurns"):
        for payload in (b"\xff" * 64, _field(1, b"\xff\xfe"), bytes(range(256)), b""):
            code = target.raw(method, payload)
            assert code != grpc.StatusCode.UNKNOWN and code != grpc.StatusCode.DEADLINE_EXCEEDED
    assert target.proc.health() == "SERVING"


def test_log_holds_no_traceback(target: Target, tmp_path: Path) -> None:
    """No request made the dispatch answer 'failed; see the log', and
    nothing else in either process logged a traceback."""
    assert " failed\nTraceback" not in target.proc.log
    assert "memvaultd.dispatch" not in target.proc.log, target.proc.log[-5000:]
    assert "Traceback" not in target.proc.log, target.proc.log[-5000:]
