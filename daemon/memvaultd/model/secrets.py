"""Credentials in a memory's text: where they are and what kind.

A memory is recalled into every agent's context and copied to every device
and remote, so a key pasted into one travels far. `find` returns each
credential-looking span of a text; callers refuse the write (`Remember`,
`Update`, `Supersede`, `Import`: the caller can fix it) or `redact` it (a
watched note: the file is not the caller's to fix). docs/secrets.md.

Two families. Forms a provider prints with a fixed prefix (AWS, GitHub,
Slack, Stripe, OpenAI, Anthropic, Google, JWT, PEM private keys) and
passwords inside URLs are matched exactly. Anything else is a *token*: a run
of at least `MIN_TOKEN` base64/url-safe characters that mixes letters and
digits, carries at least `MIN_ENTROPY` bits per character, is not hex (commit
hashes, digests, UUIDs are hex) and does not decode as base64 to plain text.
tests/test_secrets.py measures precision and recall on a corpus of made-up
secrets and look-alikes (tests/data/secrets_corpus.tsv).
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections import Counter
from dataclasses import dataclass

AWS_ACCESS_KEY = "aws access key"
GITHUB_TOKEN = "github token"
SLACK_TOKEN = "slack token"
STRIPE_KEY = "stripe key"
OPENAI_KEY = "openai key"
ANTHROPIC_KEY = "anthropic key"
GOOGLE_API_KEY = "google api key"
JWT = "json web token"
PRIVATE_KEY = "private key"
URL_PASSWORD = "password in url"
TOKEN = "high-entropy token"

# Checked in order; a span already claimed is not claimed again (an
# Anthropic key also reads as an OpenAI one, and every key as a token). Each
# pattern opens with its literal, which the regex engine searches for at C
# speed: a leading \b made each scan of a 1 KB text 13 us instead of 0.6 us
# (so the word boundary before it is checked in `find`).
_PREFIXED: tuple[tuple[str, re.Pattern[str]], ...] = (
    (PRIVATE_KEY, re.compile(
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
        r"(?:.*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|.*\Z)", re.S)),
    (AWS_ACCESS_KEY, re.compile(r"(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}(?![0-9A-Za-z])")),
    (GITHUB_TOKEN, re.compile(r"gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{40,}")),
    (SLACK_TOKEN, re.compile(r"xox[abprs]-[A-Za-z0-9-]{10,}")),
    (STRIPE_KEY, re.compile(r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}")),
    (ANTHROPIC_KEY, re.compile(r"sk-ant-[A-Za-z0-9_-]{20,}")),
    (OPENAI_KEY, re.compile(r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}")),
    (GOOGLE_API_KEY, re.compile(r"AIza[0-9A-Za-z_-]{35}")),
    (JWT, re.compile(r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
)

# user:password@host after a scheme's "://"; group 1 is the password. A
# placeholder ("${DB_PASSWORD}", "****", "<password>") names no secret.
_URL_PASSWORD = re.compile(r"://[^\s:/@]+:([^\s/@]+)@[^\s/@]")
_PLACEHOLDER = re.compile(
    r"^(?:\*+|[xX]+|\$\{\w+\}|\$[A-Z_][A-Z0-9_]*|<[^>]*>|\{\{?[^}]*\}\}?|%\w+%?|password|pass)$")

# 24 characters: a 20-character AWS key id is matched by its prefix; shorter
# random strings are too often ids, version strings or words to call.
MIN_TOKEN = 24
# Greedy, so each match is a whole run.
_TOKEN = re.compile(rf"[A-Za-z0-9+/_=-]{{{MIN_TOKEN},}}")
# Bits per character. Random base62 of 24-40 characters measures 4.5 on
# average, and 98.7% of 900 such strings are over 4.0 (with the word-run rule
# below); a 24-character string can reach at most log2(24) = 4.58.
MIN_ENTROPY = 4.0
# The runs of letters of an identifier made of words average 4 or more
# characters ("matrix_multiply_kernel_fp16": 5.3); random base62 splits into
# runs of 1-3 at its case changes and digits (2.2 on average over 900).
_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")
MIN_WORD = 4
_HEX = re.compile(r"^[0-9a-fA-F-]+$")
_PRINTABLE = re.compile(rb"^[\x20-\x7e\t\r\n]+$")


@dataclass(frozen=True)
class Finding:
    kind: str
    start: int
    end: int


def find(text: str) -> list[Finding]:
    """Every credential-looking span of `text`, in order, none overlapping."""
    found: list[Finding] = []

    def free(start: int, end: int) -> bool:
        return all(end <= f.start or start >= f.end for f in found)

    for kind, pattern in _PREFIXED:
        for match in pattern.finditer(text):
            start = match.start()
            if (start == 0 or not text[start - 1].isalnum()) and free(start, match.end()):
                found.append(Finding(kind, match.start(), match.end()))
    for match in _URL_PASSWORD.finditer(text):
        if not _PLACEHOLDER.match(match.group(1)) and free(match.start(1), match.end(1)):
            found.append(Finding(URL_PASSWORD, match.start(1), match.end(1)))
    for match in _TOKEN.finditer(text):
        if free(match.start(), match.end()) and is_token(match.group()):
            found.append(Finding(TOKEN, match.start(), match.end()))
    return sorted(found, key=lambda f: f.start)


def is_token(word: str) -> bool:
    """Whether `word` (a run of base64/url-safe characters) reads as a random secret."""
    if _HEX.match(word):
        return False  # commit hashes, digests, UUIDs: hex names things, it hides nothing
    if not any(c.isdigit() for c in word) or not any(c.isalpha() for c in word):
        return False
    body = word.strip("/=_-")
    if "/" in body and all(len(part) < MIN_TOKEN for part in body.split("/")) \
            and not any(c.isupper() for c in body):
        return False  # a path: lowercase segments between slashes
    if entropy(word) < MIN_ENTROPY:
        return False
    letters = _WORDS.findall(word)
    if sum(map(len, letters)) >= MIN_WORD * len(letters):
        return False  # words joined ("UserProfileSettings2FactorPanel", "SYNC_INTERVAL_300")
    return not _decodes_to_text(word)


def entropy(word: str) -> float:
    """Shannon entropy of `word`'s characters, in bits per character."""
    n = len(word)
    return -sum(c / n * math.log2(c / n) for c in Counter(word).values())


def _decodes_to_text(word: str) -> bool:
    """Base64 of plain text (a config value, an encoded sentence) is no secret."""
    padded = word.replace("-", "+").replace("_", "/")
    padded += "=" * (-len(padded) % 4)
    try:
        raw = base64.b64decode(padded, validate=True)
    except (binascii.Error, ValueError):
        return False
    return bool(_PRINTABLE.match(raw))


def redact(text: str, findings: list[Finding] | None = None) -> str:
    """`text` with each finding replaced by "[redacted: <kind>]"."""
    findings = find(text) if findings is None else findings
    out: list[str] = []
    at = 0
    for f in findings:
        out += [text[at:f.start], f"[redacted: {f.kind}]"]
        at = f.end
    out.append(text[at:])
    return "".join(out)


def refusal(findings: list[Finding]) -> str:
    """What a refused write says: the kinds and where, never the secret."""
    where = ", ".join(f"{f.kind} at characters {f.start}..{f.end}" for f in findings[:3])
    more = f" and {len(findings) - 3} more" if len(findings) > 3 else ""
    return (f"holds what looks like a credential: {where}{more}; memories are recalled into "
            "agents' context and synced, so keep secrets out (the CLI's --allow-secret "
            "stores it anyway)")
