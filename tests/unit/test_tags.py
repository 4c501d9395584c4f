"""Tag schemes, BIO repair, entity spans and raw-text word splitting."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bertkit.data.conll import read_conll
from bertkit.decoding.tags import detect_scheme, entity_spans, iob1_to_iob2, repair_bio, split_words, validate_bio
from bertkit.errors import BertkitError

REPO_ROOT = Path(__file__).resolve().parents[2]
DATA_DIR = Path(os.environ.get("BERTKIT_DATA_DIR", REPO_ROOT.parent / "shared" / "data"))
CONLL_DIR = DATA_DIR / "conll2003"

# The same two sentences in both schemes. IOB1 writes B- only where an entity directly
# follows another of the same type (the two LOCs at the start of the second sentence).
IOB1 = [["I-ORG", "I-ORG", "O", "I-MISC", "O", "I-PER", "I-PER"], ["I-LOC", "B-LOC", "O", "I-PER", "I-ORG"]]
IOB2 = [["B-ORG", "I-ORG", "O", "B-MISC", "O", "B-PER", "I-PER"], ["B-LOC", "B-LOC", "O", "B-PER", "B-ORG"]]


def test_detect_scheme():
    assert detect_scheme(IOB1) == "IOB1"
    assert detect_scheme(IOB2) == "IOB2"
    assert detect_scheme([["O", "O"]]) == "IOB2"
    # One entity starting with I- anywhere is enough: after O, and after another type.
    assert detect_scheme([["B-PER", "I-PER"], ["O", "I-LOC"]]) == "IOB1"
    assert detect_scheme([["B-PER", "I-LOC"]]) == "IOB1"


def test_iob1_to_iob2_by_hand():
    assert [iob1_to_iob2(tags) for tags in IOB1] == IOB2
    assert [iob1_to_iob2(tags) for tags in IOB2] == IOB2  # IOB2 is left alone


@pytest.mark.skipif(not CONLL_DIR.is_dir(), reason=f"no CoNLL-2003 data at {CONLL_DIR}")
def test_real_iob1_dev_file_converts_to_the_iob2_dev_file():
    iob1 = read_conll(CONLL_DIR / "eng_iob1" / "eng.testa")
    iob2 = read_conll(CONLL_DIR / "valid.txt")
    assert detect_scheme(e["tags"] for e in iob1) == "IOB1"
    assert detect_scheme(e["tags"] for e in iob2) == "IOB2"
    assert len(iob1) == len(iob2) == 3250
    for index, (old, new) in enumerate(zip(iob1, iob2)):
        assert old["tokens"] == new["tokens"], f"sentence {index}"
        assert iob1_to_iob2(old["tags"]) == new["tags"], f"sentence {index}"


def test_validate_bio_accepts_both_schemes_and_hyphenated_types():
    validate_bio(IOB1 + IOB2 + [["B-new-type", "I-new-type", "O"]], "train.txt")


@pytest.mark.parametrize("bad_tag", ["PER", "S-PER", "B-", "b-PER", "B_PER", "", 3])
def test_validate_bio_names_the_bad_tag_and_where(bad_tag):
    with pytest.raises(BertkitError) as excinfo:
        validate_bio([["O"], ["O", "B-PER", bad_tag]], "train.txt")
    assert "train.txt: sentence 2, token 3" in excinfo.value.message
    assert repr(bad_tag) in excinfo.value.message
    assert excinfo.value.hint


@pytest.mark.parametrize(
    "predicted, repaired",
    [
        (["I-PER", "I-PER"], ["B-PER", "I-PER"]),  # at sentence start
        (["O", "I-LOC", "O"], ["O", "B-LOC", "O"]),  # after O
        (["B-PER", "I-ORG", "I-ORG"], ["B-PER", "B-ORG", "I-ORG"]),  # after another type
        (["I-PER", "I-ORG"], ["B-PER", "B-ORG"]),  # orphan after orphan
        (["B-PER", "I-PER", "B-PER"], ["B-PER", "I-PER", "B-PER"]),  # valid: unchanged
        (["B-LOC", "O", "O"], ["B-LOC", "O", "O"]),
        ([], []),
    ],
)
def test_repair_bio(predicted, repaired):
    assert repair_bio(predicted) == repaired


def test_entity_spans_with_character_offsets():
    #       0         1         2         3         4         5
    #       0123456789012345678901234567890123456789012345678901234567
    text = "On Monday,  Angela Merkel met U.S. officials in New York."
    words, offsets = split_words(text)
    assert words == ["On", "Monday", ",", "Angela", "Merkel", "met", "U.S.", "officials",
                     "in", "New", "York", "."]  # fmt: skip
    tags = ["O", "O", "O", "B-PER", "I-PER", "O", "B-LOC", "O", "O", "B-LOC", "I-LOC", "O"]
    assert entity_spans(words, tags, offsets, text) == [
        {"type": "PER", "start_word": 3, "end_word": 5, "text": "Angela Merkel",
         "start": 12, "end": 25},
        {"type": "LOC", "start_word": 6, "end_word": 7, "text": "U.S.", "start": 30, "end": 34},
        {"type": "LOC", "start_word": 9, "end_word": 11, "text": "New York",
         "start": 48, "end": 56},
    ]  # fmt: skip


def test_entity_text_is_the_exact_substring_not_rejoined_words():
    text = "Visit New\tYork-based Acme !"
    words, offsets = split_words(text)
    assert words == ["Visit", "New", "York-based", "Acme", "!"]
    spans = entity_spans(words, ["O", "B-ORG", "I-ORG", "I-ORG", "O"], offsets, text)
    assert spans == [
        {"type": "ORG", "start_word": 1, "end_word": 4, "text": "New\tYork-based Acme",
         "start": 6, "end": 25}
    ]  # fmt: skip


def test_entity_spans_without_offsets_and_orphan_inside_tags():
    words = ["Peter", "Blackburn", "met", "EU", "officials", "from", "Bonn", "Berlin"]
    tags = ["I-PER", "I-PER", "O", "B-ORG", "I-MISC", "O", "B-LOC", "B-LOC"]
    assert entity_spans(words, tags) == [
        {"type": "PER", "start_word": 0, "end_word": 2, "text": "Peter Blackburn"},
        {"type": "ORG", "start_word": 3, "end_word": 4, "text": "EU"},
        {"type": "MISC", "start_word": 4, "end_word": 5, "text": "officials"},
        {"type": "LOC", "start_word": 6, "end_word": 7, "text": "Bonn"},
        {"type": "LOC", "start_word": 7, "end_word": 8, "text": "Berlin"},
    ]


def test_entity_at_sentence_end_and_no_entities():
    assert entity_spans(["in", "Rome"], ["O", "B-LOC"])[0]["end_word"] == 2
    assert entity_spans(["hi"], ["O"]) == []


@pytest.mark.parametrize(
    "text, words",
    [
        ("The U.S. said so.", ["The", "U.S.", "said", "so", "."]),
        ("back in the U.S.", ["back", "in", "the", "U.S."]),  # CoNLL keeps the period
        ("I don't know", ["I", "do", "n't", "know"]),
        ("CAN'T", ["CA", "N'T"]),
        ("Germany's team", ["Germany", "'s", "team"]),
        ("O'Brien isn\u2019t here", ["O'Brien", "is", "n\u2019t", "here"]),
        ("up 3.5% to 47,600", ["up", "3.5", "%", "to", "47,600"]),
        ("a New York-based firm", ["a", "New", "York-based", "firm"]),
        ("on 1996-08-28 at 10:30 a.m.", ["on", "1996-08-28", "at", "10:30", "a.m."]),
        ("Acme Corp. and George W. Bush", ["Acme", "Corp.", "and", "George", "W.", "Bush"]),
        ("Yes -- (really)?!...", ["Yes", "--", "(", "really", ")", "?", "!", "..."]),
        ('"Quote," he said.', ['"', "Quote", ",", '"', "he", "said", "."]),
        ("costs $5.", ["costs", "$", "5", "."]),
        ("Zürich café", ["Zürich", "café"]),
        ("  ", []),
    ],
)
def test_split_words(text, words):
    found, offsets = split_words(text)
    assert found == words
    assert [text[start:end] for start, end in offsets] == words
