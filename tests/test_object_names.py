"""The names a remote accepts and the keys they become: one module
(`memvault_base.objects.names`), checked by the daemon's remotes before a
name leaves the device and by memvault-server on what any client sends."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memvault_base.errors import InvalidArgument, ResourceExhausted
from memvault_base.objects import names
from memvault_server import access, chain, servicer
from memvaultd.sync.remotes import blobs, grpc_remote, memory

from .test_remote_contract import BAD_NAMES

GOOD_NAMES = ["a", "a/b", "..a", "a..", "x" * 200, "a.b-c_d/e", "0/1/2/3", "-", "_"]
# A prefix need not be a whole name: "" lists everything, "snapshots/" a folder.
GOOD_PREFIXES = ["", "x/", "snapshots/", "a//", "..", ".", "a/../b", *GOOD_NAMES]
BAD_PREFIXES = ["/x", "/", "A", "a b", "caf\u00e9", "x" * 201, "a\\b", "a\x00b"]
GOOD_VAULT_IDS = ["a", "0", "a-b_c", "x" * 64, "0123456789abcdef0123456789abcdef"]
BAD_VAULT_IDS = ["", "-a", "_a", "A", "a.b", "a/b", ".", "..", "..a", "x" * 65, "a b",
                 "caf\u00e9", "a\x00"]


def _accepts(check: object, value: str) -> bool:
    assert callable(check)
    try:
        check(value)
    except InvalidArgument:
        return False
    return True


def test_the_daemon_and_the_server_check_with_the_one_module() -> None:
    for module in (blobs, grpc_remote, memory, servicer):
        assert module.check_name is names.check_name, module.__name__
        assert module.check_prefix is names.check_prefix, module.__name__
    for module in (blobs, grpc_remote, memory, chain):
        assert module.check_version is names.check_version, module.__name__
    assert access.check_vault_id is names.check_vault_id


@pytest.mark.parametrize("name", BAD_NAMES)
def test_bad_names_are_refused(name: str) -> None:
    assert not _accepts(names.check_name, name)


@pytest.mark.parametrize("name", GOOD_NAMES)
def test_good_names_are_accepted(name: str) -> None:
    assert names.check_name(name) == name


@pytest.mark.parametrize("prefix", GOOD_PREFIXES + BAD_PREFIXES)
def test_prefixes(prefix: str) -> None:
    assert _accepts(names.check_prefix, prefix) == (prefix in GOOD_PREFIXES)


@pytest.mark.parametrize("vault_id", GOOD_VAULT_IDS + BAD_VAULT_IDS + BAD_NAMES)
def test_vault_ids(vault_id: str) -> None:
    assert _accepts(names.check_vault_id, vault_id) == (vault_id in GOOD_VAULT_IDS)


@given(number=st.integers(-2, names.MAX_VERSION + 2), parent_bytes=st.sampled_from([0, 31, 32]))
def test_version_rules(number: int, parent_bytes: int) -> None:
    good = 1 <= number <= names.MAX_VERSION and parent_bytes == (0 if number == 1 else 32)
    try:
        names.check_version(number, b"p" * parent_bytes)
    except InvalidArgument:
        assert not good
    else:
        assert good


def test_limits() -> None:
    assert names.check_limit(1) == 1
    assert names.check_limit(1000) == 1000
    for bad in (0, -1, 1001):
        with pytest.raises(InvalidArgument):
            names.check_limit(bad)


@given(st.lists(st.integers(0, names.MAX_VERSION), unique=True))
def test_version_keys_sort_as_numbers_and_parse_back(numbers: list[int]) -> None:
    keys = [names.version_key("v", number) for number in numbers]
    assert sorted(keys) == [names.version_key("v", number) for number in sorted(numbers)]
    prefix = names.versions_prefix("v")
    assert all(key.startswith(prefix) for key in keys)
    strays = [prefix + "tmp", prefix + "12", prefix + "x" * names.VERSION_DIGITS]
    assert names.version_numbers(keys + strays, prefix) == numbers


@pytest.mark.parametrize("digit", ["\u00b2", "\u0661", "\uff11", "\u09e7"])
def test_only_ascii_digits_make_a_version_number(digit: str) -> None:
    # Each passes str.isdigit(); int() refuses superscripts and reads the
    # others as a number whose key is another name.
    prefix = names.versions_prefix("v")
    planted = prefix + digit * names.VERSION_DIGITS
    assert names.version_numbers([names.version_key("v", 7), planted], prefix) == [7]


def test_object_sizes() -> None:
    assert names.check_object_size(bytes(names.MAX_OBJECT), "x") == bytes(names.MAX_OBJECT)
    with pytest.raises(ResourceExhausted, match=f"over the {names.MAX_OBJECT} bytes"):
        names.check_object_size(bytes(names.MAX_OBJECT + 1), "version 3")


def test_the_key_layout() -> None:
    assert names.object_key("v", "snapshots/1") == "v/objects/snapshots/1"
    assert names.object_key("v", "a").startswith(names.objects_prefix("v"))
    assert names.version_key("v", 7) == "v/versions/00000000000000000007"
    assert names.owner_key("v") == "v/owner"
