"""The keyword channel leaves out the words of an entity the query names
(`hybrid.unmatched_names`): the entity signal rewards that entity's memories,
and the name as a keyword would favour the shortest of them."""

from __future__ import annotations

import numpy as np

from memvaultd.index.layer import Layer
from memvaultd.model.memory import Memory
from memvaultd.recall.hybrid import (
    HYBRID,
    KEYWORD,
    FusionSettings,
    left_to_entities,
    unmatched_names,
)

DIM = 8


def _put(layer: Layer, memory_id: str, text: str, entity: str) -> None:
    vector = np.ones(DIM, dtype=np.float32) / np.sqrt(DIM)
    layer.put(Memory(id=memory_id, text=text, entity=entity), vector)


def test_a_named_entity_is_left_to_the_entity_signal() -> None:
    layer = Layer(DIM)
    _put(layer, "a", "Ada Lovelace: glad it helped!", "Ada Lovelace")
    _put(layer, "b", "Ada Lovelace: the engine computes Bernoulli numbers", "Ada Lovelace")
    assert unmatched_names("What did Ada Lovelace say about the engine?", layer) == {
        "ada", "lovelac"}
    hits = layer.keywords.search("What did Ada Lovelace say about the engine?",
                                 unmatched_names("What did Ada Lovelace say about the engine?",
                                                 layer))
    assert hits.matched == ["engin"]
    assert hits.scores_of(["a", "b"])[0] == 0.0


def test_only_a_whole_name_with_other_words_is_left_out() -> None:
    layer = Layer(DIM)
    _put(layer, "a", "Ada Lovelace wrote the first program", "Ada Lovelace")
    assert unmatched_names("Ada Lovelace", layer) == frozenset()  # nothing else to match
    assert unmatched_names("what did Ada write", layer) == frozenset()  # not the whole name
    assert unmatched_names("what did Grace write", layer) == frozenset()  # no such entity


def test_an_entity_no_memory_names_any_more_is_forgotten() -> None:
    layer = Layer(DIM)
    _put(layer, "a", "prefers tea", "Linus")
    _put(layer, "b", "prefers coffee", "Linus")
    layer.remove("a")
    assert unmatched_names("what does Linus drink", layer) == {"linus"}
    layer.update(Memory(id="b", text="prefers coffee", entity="Grace"))
    assert unmatched_names("what does Linus drink", layer) == frozenset()
    assert unmatched_names("what does Grace drink", layer) == {"grace"}
    layer.remove("b")
    assert unmatched_names("what does Grace drink", layer) == frozenset()


def test_a_restored_layer_knows_its_entities() -> None:
    layer = Layer(DIM)
    vectors = np.ones((2, DIM), dtype=np.float32) / np.sqrt(DIM)
    layer.restore([Memory(id="a", text="prefers tea", entity="Linus"),
                   Memory(id="b", text="prefers coffee", entity="Linus")], list(vectors))
    assert unmatched_names("what does Linus drink", layer) == {"linus"}


def test_the_name_stays_a_keyword_where_no_entity_signal_stands_in() -> None:
    layer = Layer(DIM)
    _put(layer, "a", "prefers tea", "Linus")
    text = "what does Linus drink"
    assert left_to_entities(text, layer, FusionSettings(), HYBRID) == {"linus"}
    assert left_to_entities(text, layer, FusionSettings(), KEYWORD) == frozenset()
    assert left_to_entities(text, layer, FusionSettings(method="rrf"), HYBRID) == frozenset()
    assert left_to_entities(text, layer, FusionSettings(entity=0.0), HYBRID) == frozenset()


def test_names_that_share_words_are_told_apart() -> None:
    layer = Layer(DIM)
    _put(layer, "a", "wrote notes", "Ada Lovelace")
    _put(layer, "b", "wrote code", "Ada Smith")
    _put(layer, "c", "wrote songs", "Smith")
    _put(layer, "d", "wrote poems", "Mary Mary Quite")
    assert unmatched_names("what did Ada Smith write", layer) == {"ada", "smith"}
    assert unmatched_names("what did Lovelace Ada write", layer) == {"ada", "lovelac"}
    assert unmatched_names("what did quite mary write", layer) == {"mari", "quit"}
    layer.remove("b")
    assert unmatched_names("what did Ada Smith write", layer) == {"smith"}
    layer.remove("c")
    assert unmatched_names("what did Ada Smith write", layer) == frozenset()
    assert unmatched_names("what did Ada Lovelace write", layer) == {"ada", "lovelac"}
