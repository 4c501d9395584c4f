"""Reading token-tagging data: CoNLL column files and JSON-style records."""

from __future__ import annotations

import pytest

from bertkit.data.conll import read_conll, read_tagged_records
from bertkit.errors import BertkitError


def write(tmp_path, text: str, name: str = "data.txt", encoding: str = "utf-8"):
    path = tmp_path / name
    path.write_bytes(text.encode(encoding))
    return path


def assert_user_error(excinfo, *fragments: str) -> None:
    error = excinfo.value
    assert "\n" not in error.message and error.hint
    for fragment in fragments:
        assert fragment in error.message


CONLL_2003_STYLE = """\
-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC

Peter NNP B-NP B-PER
Blackburn NNP I-NP I-PER

-DOCSTART- -X- -X- O

BRUSSELS NNP B-NP B-LOC
"""


def test_reads_conll2003_columns_skipping_docstart(tmp_path):
    examples = read_conll(write(tmp_path, CONLL_2003_STYLE))
    assert examples == [  # each sentence knows its -DOCSTART- document (finetune --folds keeps them together)
        {"tokens": ["EU", "rejects", "German"], "tags": ["B-ORG", "O", "B-MISC"], "document": 0},
        {"tokens": ["Peter", "Blackburn"], "tags": ["B-PER", "I-PER"], "document": 0},
        {"tokens": ["BRUSSELS"], "tags": ["B-LOC"], "document": 1},
    ]


def test_docstart_without_blank_line_still_ends_the_sentence(tmp_path):
    text = "a O\nb B-LOC\n-DOCSTART- O\nc O\n\n\n\n"
    assert [e["tokens"] for e in read_conll(write(tmp_path, text))] == [["a", "b"], ["c"]]


def test_any_number_of_middle_columns(tmp_path):
    text = "John x y z B-PER\nran x y z O\n"
    assert read_conll(write(tmp_path, text)) == [{"tokens": ["John", "ran"], "tags": ["B-PER", "O"]}]


def test_two_column_tab_file_with_other_entity_types(tmp_path):
    # Tab-separated, so a token may contain a space.
    text = "Ada\tB-person\nLovelace\tI-person\nvisited\tO\nNew York\tB-location\n"
    assert read_conll(write(tmp_path, text)) == [
        {"tokens": ["Ada", "Lovelace", "visited", "New York"], "tags": ["B-person", "I-person", "O", "B-location"]}
    ]


def test_space_and_tab_separated_files_read_the_same(tmp_path):
    spaced = read_conll(write(tmp_path, "Paris  NNP   B-LOC\nis VBZ O\n", "spaced.txt"))
    tabbed = read_conll(write(tmp_path, "Paris\tNNP\tB-LOC\nis\tVBZ\tO\n", "tabbed.txt"))
    assert spaced == tabbed == [{"tokens": ["Paris", "is"], "tags": ["B-LOC", "O"]}]


def test_bom_crlf_and_trailing_whitespace_are_tolerated(tmp_path):
    text = "\ufeffRome B-LOC \t\r\nis O  \r\n\r\nyes O\r\n"
    assert read_conll(write(tmp_path, text)) == [
        {"tokens": ["Rome", "is"], "tags": ["B-LOC", "O"]},
        {"tokens": ["yes"], "tags": ["O"]},
    ]


def test_wrong_column_count_names_file_and_line(tmp_path):
    path = write(tmp_path, "-DOCSTART- -X- O O\n\nEU NNP B-ORG\nrejects VBZ\n")
    with pytest.raises(BertkitError) as excinfo:
        read_conll(path)
    assert_user_error(excinfo, f"{path}:4", "2 columns", "has 3")


@pytest.mark.parametrize("text", ["", "\n\n  \n", "-DOCSTART- -X- -X- O\n\n"])
def test_file_without_sentences_is_an_error(tmp_path, text):
    with pytest.raises(BertkitError) as excinfo:
        read_conll(write(tmp_path, text))
    assert_user_error(excinfo, "no sentences")


def test_missing_file_is_a_user_error(tmp_path):
    with pytest.raises(BertkitError) as excinfo:
        read_conll(tmp_path / "nope.txt")
    assert_user_error(excinfo, "not found")


def test_non_utf8_file_is_a_user_error(tmp_path):
    with pytest.raises(BertkitError) as excinfo:
        read_conll(write(tmp_path, "M\u00fcnchen B-LOC\n", encoding="latin-1"))
    assert_user_error(excinfo, "UTF-8")


def test_one_column_file_needs_require_tags_false(tmp_path):
    path = write(tmp_path, "Hello\nworld\n\nagain\n")
    with pytest.raises(BertkitError) as excinfo:
        read_conll(path)
    assert_user_error(excinfo, f"{path}:1", "one column")
    assert read_conll(path, require_tags=False) == [{"tokens": ["Hello", "world"]}, {"tokens": ["again"]}]


LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


def test_records_with_string_tags():
    records = [{"tokens": ["Ada", "wins"], "tags": ["B-PER", "O"], "id": "7"}]
    assert read_tagged_records(records, "train.jsonl") == [{"tokens": ["Ada", "wins"], "tags": ["B-PER", "O"]}]


def test_records_with_hf_integer_ner_tags():
    records = [{"tokens": ["Ada", "Lovelace", "in", "Rome"], "ner_tags": [1, 2, 0, 3]}]
    assert read_tagged_records(records, "train.json", label_names=LABELS) == [
        {"tokens": ["Ada", "Lovelace", "in", "Rome"], "tags": ["B-PER", "I-PER", "O", "B-LOC"]}
    ]


def test_integer_tags_need_label_names():
    with pytest.raises(BertkitError) as excinfo:
        read_tagged_records([{"tokens": ["a"], "tags": [0]}], "x.jsonl")
    assert_user_error(excinfo, "x.jsonl: record 0", "label names")


def test_integer_tag_outside_label_names():
    with pytest.raises(BertkitError) as excinfo:
        read_tagged_records([{"tokens": ["a"], "tags": [9]}], "x.jsonl", label_names=LABELS)
    assert_user_error(excinfo, "record 0", "9")


def test_empty_token_list_names_the_record():
    records = [{"tokens": ["a"], "tags": ["O"]}, {"tokens": [], "tags": []}]
    with pytest.raises(BertkitError) as excinfo:
        read_tagged_records(records, "dev.jsonl")
    assert_user_error(excinfo, "dev.jsonl: record 1", "empty token list")


def test_token_and_tag_counts_must_match():
    with pytest.raises(BertkitError) as excinfo:
        read_tagged_records([{"tokens": ["a", "b"], "tags": ["O"]}], "dev.jsonl")
    assert_user_error(excinfo, "record 0", "2 tokens but 1 tags")


def test_blank_token_is_an_error():
    with pytest.raises(BertkitError) as excinfo:
        read_tagged_records([{"tokens": ["a", " "], "tags": ["O", "O"]}], "dev.jsonl")
    assert_user_error(excinfo, "record 0", "token 1")


def test_untagged_records_only_when_tags_not_required():
    records = [{"tokens": ["Hello", "Rome"]}]
    with pytest.raises(BertkitError) as excinfo:
        read_tagged_records(records, "predict.jsonl")
    assert_user_error(excinfo, "record 0", "no 'tags'")
    assert read_tagged_records(records, "predict.jsonl", require_tags=False) == [{"tokens": ["Hello", "Rome"]}]


def test_tokens_must_be_a_list_not_a_string():
    with pytest.raises(BertkitError) as excinfo:
        read_tagged_records([{"tokens": "Hello Rome", "tags": ["O", "B-LOC"]}], "d.jsonl")
    assert_user_error(excinfo, "record 0", "list of words")
