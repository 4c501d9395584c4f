"""A canary for the tokenizers library itself: every overflow window of a long text is there.

QA contexts, NER documents, long-text classification and `embed` cut long inputs into overlapping
windows with ``return_overflowing_tokens`` and ``stride``. tokenizers 0.23.1 and 0.23.2 stopped
tokenizing at ``max_length`` and cut the windows from those tokens alone, so the tail of every long
input vanished without an error (huggingface/tokenizers#2091; pyproject.toml excludes them). If a
future release breaks it again, this fails first, with the reason in its name."""

from __future__ import annotations

import pytest

tokenizers = pytest.importorskip("tokenizers")


def test_overflow_windows_cover_the_whole_text_with_the_stride_as_overlap():
    from tokenizers import Tokenizer, models, pre_tokenizers

    tokenizer = Tokenizer(models.WordLevel({f"w{i}": i for i in range(100)} | {"[UNK]": 100}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.enable_truncation(10, stride=2)
    encoding = tokenizer.encode(" ".join(f"w{i}" for i in range(40)))
    windows = [encoding.ids] + [window.ids for window in encoding.overflowing]
    # windows of 10 tokens that step by 8 (2 shared): 0-9, 8-17, 16-25, 24-33, 32-39
    assert windows == [list(range(start, min(start + 10, 40))) for start in range(0, 33, 8)], tokenizers.__version__
