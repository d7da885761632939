"""Whether a new memory restates, updates or only sits beside an earlier one.

`judge(earlier, new, cosine, reinforce_cosine)` compares two texts of the
same type and topic and says what a remember of `new` is, given an earlier
memory:

- `REINFORCED`: the same statement again. Every fact-bearing word of each
  text is in the other (after light normalisation), their numbers and
  negations are the same, and the words come in a compatible order. Only
  then is no copy stored: a reinforcement keeps the earlier text, so it must
  say everything the new one says.
- `SUPERSEDED`: the same subject with something changed or added (a number,
  a date, a name, a negation, a value, a detail). The new memory is stored
  and the earlier one is kept in its chain, hidden from recall.
- `ADDED`: a different statement; both stay.

A cosine alone cannot tell these apart: to all-MiniLM-L6-v2, "The Q3
deadline is March 3" and "... is April 15" are nearly one vector, and so are
"dark mode" and "light mode" (0.79 as words) while "likes" and "enjoys" score
0.56. So the cosine only gates (nothing below `SUPERSEDE_COSINE` is the same
subject), and the decision rests on what differs between the two texts.

The words: lower-cased, contractions expanded ("can't" -> "can not"), light
words dropped (articles, forms of "be", "have", "do" and "use", pronouns and
"user", fillers such as "really" and "currently"; relation words such as
"to", "from", "in" only mark their place for the order test), stemmed as
the keyword index stems, and mapped through a short table of equivalences
(`_EQUIVALENT`: "purchase" = "buy", "allergic" = "allergy", ...). A word of
one text that is two adjacent words of the other counts as the same
("hometown" / "home town"). Numbers are values, written in digits or words
("4" = "four" = "4th", "1,200" = "1200", "85k" = "85000"). Negations are
counted ("not", "never", "no longer", "n't", ...). Order: the same order
up to one moved block ("Alice's birthday is June 5" / "June 5 is Alice's
birthday"), a passive whose agent was the subject ("Bob manages X" / "X is
managed by Bob"), or a swap of the two sides of an "and"; any other
reordering ("Alice reports to Bob" / "Bob reports to Alice", "from Windows
to Linux" / "from Linux to Windows") is a change.

A change is one place: at most three words gone, the changed words of each
text standing together, and at most one new word more than the words gone
(`_one_change`). Two statements on one subject that differ in several
places ("the old bike lock code was changed" / "the new bike lock code is
written in the notebook") are both kept.

The thresholds were chosen on the labelled pairs of
`tests/data/restatement_pairs.tsv` (378 pairs, cosines of all-MiniLM-L6-v2;
figures in docs/recall.md). No threshold can make a changed fact a
reinforcement: that takes identical words, numbers and negations.

- `reinforce_cosine` (config `restatement_threshold`, 0.70): only a gate.
  Every paraphrase of the set that the word test accepts scores 0.91 or
  more, so any value from 0.70 to 0.91 gives the same figures; 0.70 leaves
  room for looser paraphrases than the set's.
- `SUPERSEDE_COSINE` 0.55, `SUPERSEDE_OVERLAP` 0.5, `SAME_SUBJECT_COSINE`
  0.80 split "same subject, one value changed" from "another statement":
  a change keeps at least half of the earlier text's words, or is a short
  statement whose one word changed ("is vegetarian" / "is vegan", 0.87).
  Over the grid 0.50-0.60 x 0.4-0.6 x 0.75-0.85 these values sit in the
  flat middle (14 of 378 pairs judged otherwise than labelled, none a
  reinforcement of a change); an overlap of 0.6 nearly doubles the errors.

No I/O: a pure function of two texts and their cosine, unit-tested alone.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from dataclasses import dataclass

from memvaultd.index.keyword import stem
from memvaultd.model.commands import ADDED, REINFORCED, SUPERSEDED

__all__ = ["ADDED", "REINFORCED", "SUPERSEDED", "Verdict", "judge", "statement"]

SUPERSEDE_COSINE = 0.55
SUPERSEDE_OVERLAP = 0.5
SAME_SUBJECT_COSINE = 0.80
# The most words a changed value replaces: "Ursula Le Guin" -> "Octavia Butler".
_VALUE_WORDS = 3


@dataclass(frozen=True)
class Verdict:
    outcome: str  # ADDED | REINFORCED | SUPERSEDED
    # What differs, for people: "numbers 3 -> 15", "words march -> april".
    reason: str = ""


@dataclass(frozen=True)
class Statement:
    """What a text asserts, as far as words show it."""

    words: tuple[str, ...]  # fact-bearing words and numbers, in order, normalised
    # `words` with the relation words ("to", "from", "in"...) in place, as
    # ">to", ">from": what tells "from Windows to Linux" from "from Linux to
    # Windows" when those words are otherwise dropped.
    sequence: tuple[str, ...]
    numbers: Counter[str]
    negations: int
    agent: str  # with "by": the first word after it (a passive's agent), else ""

    @property
    def bag(self) -> frozenset[str]:
        return frozenset(self.words)


def judge(earlier: str, new: str, cosine: float, reinforce_cosine: float) -> Verdict:
    """What remembering `new` is, given an earlier memory `earlier` of its
    type and topic and the cosine of their embeddings."""
    if cosine < SUPERSEDE_COSINE:
        return Verdict(ADDED)
    old, now = statement(earlier), statement(new)
    old_words, new_words = _joined(old.words, now.bag), _joined(now.words, old.bag)
    differences = _differences(old, now, old_words, new_words)
    if not differences and cosine >= reinforce_cosine:
        if _compatible_order(old_words, new_words, old, now):
            return Verdict(REINFORCED)
        differences = ["word order"]
    if not differences:
        return Verdict(SUPERSEDED, "word order") if cosine >= SAME_SUBJECT_COSINE \
            else Verdict(ADDED)
    kept = len(set(old_words) & set(new_words)) / max(len(set(old_words)), 1)
    gone, came = set(old_words) - set(new_words), set(new_words) - set(old_words)
    if _one_change(old_words, gone, new_words, came) and (
            kept >= SUPERSEDE_OVERLAP or cosine >= SAME_SUBJECT_COSINE):
        return Verdict(SUPERSEDED, "; ".join(differences))
    return Verdict(ADDED)


def _one_change(old: tuple[str, ...], gone: set[str], new: tuple[str, ...], came: set[str]
                ) -> bool:
    """Whether `new` changes one value of `old` (or adds to it): at most
    `_VALUE_WORDS` words gone, each side's changes in one place, and at most
    one new word more than the words gone ("Lisbon" -> "Madrid, Spain"), or
    only words added. More is another statement on the same subject ("ada
    writes the compiler" / "ada prefers rust for the compiler backend")."""
    if len(gone) > _VALUE_WORDS or (gone and len(came) > len(gone) + 1):
        return False
    return _one_run(old, gone) and _one_run(new, came)


def _one_run(words: tuple[str, ...], changed: set[str]) -> bool:
    """Whether the `changed` words stand together, one kept word between
    them at most ("120 over 80" -> "135 over 85"): a changed value is one
    place of a statement ("March 3" -> "April 15"); changes in two places
    ("the old code was changed" / "the new code is in the notebook") make
    another statement about the same thing."""
    at = [i for i, word in enumerate(words) if word in changed]
    return not at or at[-1] - at[0] + 1 <= len(at) + 1


def _differences(old: Statement, now: Statement, old_words: tuple[str, ...],
                 new_words: tuple[str, ...]) -> list[str]:
    out = []
    if old.numbers != now.numbers:
        out.append(f"numbers {_listed(old.numbers - now.numbers)} -> "
                   f"{_listed(now.numbers - old.numbers)}")
    if old.negations != now.negations:
        out.append("negation " + ("added" if now.negations > old.negations else "removed"))
    gone = sorted(set(old_words) - set(new_words) - set(old.numbers))
    came = sorted(set(new_words) - set(old_words) - set(now.numbers))
    if gone or came:
        out.append(f"words {' '.join(gone) or '-'} -> {' '.join(came) or '-'}")
    return out


def _listed(numbers: Counter[str]) -> str:
    return " ".join(sorted(numbers.elements())) or "-"


def _compatible_order(a: tuple[str, ...], b: tuple[str, ...], old: Statement,
                      now: Statement) -> bool:
    """The same order up to one moved block ("on Thursday, lunch with Priya"),
    or an active/passive pair. Compared with the relation marks when both
    texts have (each kind as often), so that two sides of a relation cannot
    trade places."""
    marks_a, marks_b = Counter(_marks(old.sequence)), Counter(_marks(now.sequence))
    shared = {mark for mark in marks_a | marks_b if marks_a[mark] == marks_b[mark]}
    a = _joined(tuple(w for w in old.sequence if not _is_mark(w) or w in shared), now.bag)
    b = _joined(tuple(w for w in now.sequence if not _is_mark(w) or w in shared), old.bag)
    if bool(old.agent) == bool(now.agent):
        return _one_block_moved(a, b)
    # One is a passive ("X is managed by Bob"): its agent is the other's subject.
    active, agent = (a, now.agent) if now.agent else (b, old.agent)
    words = [w for w in active if not _is_mark(w)]
    return bool(words) and words[0] == agent


def _is_mark(word: str) -> bool:
    return word.startswith(_MARK)


def _marks(sequence: tuple[str, ...]) -> list[str]:
    return [w for w in sequence if _is_mark(w)]


def _one_block_moved(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """Whether `b` is `a` with at most one contiguous run of it moved elsewhere."""
    if a == b:
        return True
    if sorted(a) != sorted(b):
        return False
    n = len(a)
    for start in range(n):
        for end in range(start + 1, n + 1):
            block, rest = a[start:end], a[:start] + a[end:]
            for at in range(len(rest) + 1):
                if at != start and rest[:at] + block + rest[at:] == b:
                    return True
    return False


def _joined(words: tuple[str, ...], other: frozenset[str]) -> tuple[str, ...]:
    """`words` with each adjacent pair that the other text writes as one word
    joined ("home", "town" -> "hometown")."""
    out: list[str] = []
    i = 0
    while i < len(words):
        if i + 1 < len(words) and words[i] + words[i + 1] in other:
            out.append(words[i] + words[i + 1])
            i += 2
        else:
            out.append(words[i])
            i += 1
    return tuple(out)


# -- from text to statement ----------------------------------------------------

_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "`": "'"})
_CONTRACTIONS = [
    (re.compile(r"\bcan't\b|\bcannot\b"), "can not"),
    (re.compile(r"\bwon't\b"), "will not"),
    (re.compile(r"\bshan't\b"), "shall not"),
    (re.compile(r"n't\b"), " not"),
    (re.compile(r"'(s|re|ve|ll|d|m)\b"), ""),
    (re.compile(r"\bno longer\b|\bnot anymore\b|\bnot any more\b"), "not"),
    (re.compile(r"\bwould like\b|\bwould love\b"), "want"),
    (re.compile(r"\bdislik(e|es|ed|ing)\b"), "not like"),
    (re.compile(r"\bbeen to\b"), "visited"),
    (re.compile(r"\bused to\b"), "formerly"),
    (re.compile(r"(\d)\s*a\.?m\b\.?"), r"\1am"),
    (re.compile(r"(\d)\s*p\.?m\b\.?"), r"\1pm"),
    (re.compile(r"(\d)\s*(%|percent\b|per cent\b)"), r"\1 percent"),
    (re.compile(r"\$\s*(\d)"), r"dollar \1"),
    (re.compile(r"€\s*(\d)"), r"euro \1"),
    (re.compile(r"£\s*(\d)"), r"pound \1"),
    (re.compile(r"\b(?:over|above|more than) (?=\d)"), "morethan "),
    (re.compile(r"\b(?:under|below|less than|fewer than) (?=\d)"), "lessthan "),
]
_TOKEN = re.compile(r"[a-z0-9]+(?:[.:,][0-9]+)*")
_NUMBER = re.compile(r"^(\d+(?:[.:]\d+)*)(st|nd|rd|th|k|am|pm|s)?$")
_GROUPED = re.compile(r"^\d{1,3}(?:,\d{3})+$")
_VALUE = re.compile(r"^\d+(?:[.:]\d+)*$")

# Relation words: dropped from the words, kept as a mark in the sequence.
_MARK = ">"
# "over" and "than" as "to": "prefers vitest over / to jest" (over a number
# is rewritten to "morethan" first).
_RELATIONS = {word: _MARK + ("to" if word in ("over", "than") else word)
              for word in ("to", "from", "over", "than", "in", "on", "at", "for", "with",
                           "into", "onto")}
_NEGATIONS_TEXT = "not no never none nobody nothing nowhere neither nor without non"
_NEGATIONS = frozenset(_NEGATIONS_TEXT.split())
_LIGHT_TEXT = """
a an the this that these those there here it its is are am be been being was were
do does did doing done has have had having of by as and use uses used using utilize utilise
i me my mine myself we us our ours you your yours he him his she her hers they them
their theirs user users person one's
really actually currently just also so please indeed still now very quite
will shall which who whom whose what something
every each all can
"""
_LIGHT = frozenset(_LIGHT_TEXT.split())
_NUMBER_WORDS = {
    word: str(value) for value, words in enumerate([
        "zero", "one once first", "two twice second", "three thrice third", "four fourth",
        "five fifth", "six sixth", "seven seventh", "eight eighth", "nine ninth", "ten tenth",
        "eleven eleventh", "twelve twelfth dozen", "thirteen thirteenth",
        "fourteen fourteenth", "fifteen fifteenth", "sixteen sixteenth",
        "seventeen seventeenth", "eighteen eighteenth", "nineteen nineteenth",
        "twenty twentieth"]) for word in words.split()
} | {"thirty": "30", "forty": "40", "fifty": "50", "sixty": "60", "seventy": "70",
     "eighty": "80", "ninety": "90", "hundred": "100", "thousand": "1000",
     "million": "1000000", "billion": "1000000000", "half": "0.5"}

# Words that say the same in a memory, whatever else they can mean. Each
# group maps to its first word. A wrong entry would merge a changed fact,
# so a pair goes in only when no sense of one is a different value of the
# other ("soccer" / "football" stays out: American football).
_EQUIVALENT_GROUPS = """
buy purchase bought purchased
start begin began begun started
end finish finished ended
help assist assistance helped assisted
need require required needed
big large
small little
fast quick
child children kid kids
mother mom mum
father dad
car automobile
bike bicycle
call name named called
keep retain kept retained
forbid forbidden prohibit prohibited
plan schedule planned scheduled
allergy allergic
afraid scared
folder directory
about around roughly approximately
under below
switch move switched moved
visit visited
favourite favorite
colour color
collect collection collected
lives live reside resides resided lived
film movie
holiday vacation
like enjoy likes enjoys liked enjoyed
hate detest loathe
photo picture photograph
sofa couch
doctor physician
lawyer attorney
nearly almost
often frequently
usually normally typically generally
maybe perhaps possibly
telephone phone
tv television
ok okay
wrong incorrect
reply respond replied responded
choose pick select chose picked selected chosen
show display showed displayed shown
fix repair fixed repaired
mistake error
repo repository
docs documentation
config configuration
db database
k8s kubernetes
js javascript
ts typescript
""".strip().splitlines()


@functools.lru_cache(maxsize=4096)
def statement(text: str) -> Statement:
    """The words, numbers and negations of `text` (cached: a batch compares
    one text with several candidates)."""
    lowered = text.lower().translate(_APOSTROPHES)
    for pattern, replacement in _CONTRACTIONS:
        lowered = pattern.sub(replacement, lowered)
    words: list[str] = []
    sequence: list[str] = []
    numbers: Counter[str] = Counter()
    negations = 0
    agent = ""
    after_by = False
    for raw in _TOKEN.findall(lowered.replace("-", " ").replace("/", " ")):
        for token in _parts(raw):
            if token in _NEGATIONS:
                negations += 1
                continue
            if token == "by":
                after_by = True
            if token in _RELATIONS:
                sequence.append(_RELATIONS[token])
                continue
            if token in _LIGHT and token not in _NUMBER_WORDS:
                continue
            word = _normal(token)
            if _VALUE.match(word):
                numbers[word] += 1
            words.append(word)
            sequence.append(word)
            if after_by and not agent:
                agent = word
    return Statement(_unordered_and(words, lowered), _unordered_and(sequence, lowered),
                     numbers, negations, agent)


def _parts(raw: str) -> list[str]:
    """One token as its words: "6am" -> "6", "am"; "85k" -> "85000"."""
    if _GROUPED.match(raw):
        return [raw.replace(",", "")]
    raw = raw.replace(",", " ").strip()
    match = _NUMBER.match(raw)
    if not match:
        return raw.split()
    number, suffix = match.groups()
    number = number.lstrip("0") or "0" if number.isdigit() else number
    if suffix == "k":
        return [str(int(float(number) * 1000))] if number.replace(".", "").isdigit() \
            else [number]
    # "am" alone is a form of "be": the hour's is kept apart.
    return [number] + ([suffix + "."] if suffix in ("am", "pm") else [])


@functools.lru_cache(maxsize=1 << 14)
def _normal(token: str) -> str:
    if token in _NUMBER_WORDS:
        return _NUMBER_WORDS[token]
    if token[0].isdigit():
        return token
    word = _EQUIVALENT.get(token) or _EQUIVALENT.get(stem(token)) or _trimmed(stem(token))
    return _EQUIVALENT.get(word, word)


def _trimmed(word: str) -> str:
    """Endings the keyword stemmer keeps: "rotate" / "rotat(es)", "rotation"."""
    if len(word) > 6 and word.endswith("ion"):
        word = word[:-3]
    if len(word) > 4 and word.endswith("e"):
        word = word[:-1]
    return word


def _unordered_and(words: list[str], text: str) -> tuple[str, ...]:
    """"french and german" and "german and french" in one order: the two words
    around each "and" are sorted (their order says nothing)."""
    for left, right in re.findall(r"([a-z0-9]+),? and ([a-z0-9]+)", text):
        a, b = _normal(left), _normal(right)
        if a in words and b in words:
            i, j = words.index(a), words.index(b)
            if abs(i - j) == 1:
                lo = min(i, j)
                words[lo:lo + 2] = sorted(words[lo:lo + 2])
    return tuple(words)


def _equivalents() -> dict[str, str]:
    table: dict[str, str] = {}
    for line in _EQUIVALENT_GROUPS:
        group = line.split()
        for word in group:
            table[word] = group[0]
            table[stem(word)] = group[0]
    return table


_EQUIVALENT = _equivalents()
