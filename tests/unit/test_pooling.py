"""Pooling modes on hand-made hidden states, against values worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bertkit.errors import BertkitError
from bertkit.networks.pooling import Pooling, combine_windows, parse_pooling, pool, token_vectors

# Two rows of three tokens, dim 2; the second row's last token is padding with a huge value that
# would show up in any mean or max that let padding in. Layer k = BASE + 10k, k = 0 (embeddings)..4.
BASE = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], [[-1.0, 0.0], [2.0, -3.0], [100.0, 100.0]]])
HIDDEN = tuple(BASE + 10 * k for k in range(5))
MASK = torch.tensor([[1, 1, 1], [1, 1, 0]])


@pytest.mark.parametrize(
    "mode, expected",
    [
        ("cls", [[41, 42], [39, 40]]),  # last layer, first token
        ("mean", [[43, 44], [40.5, 38.5]]),  # (39+42)/2, (40+37)/2: padding excluded
        ("max", [[45, 46], [42, 40]]),  # 140 (padding) never wins
        ("last4-sum", [[112, 116], [102, 94]]),  # 4 * mean(base) + 10+20+30+40
        ("last4-concat", [[13, 14, 23, 24, 33, 34, 43, 44], [10.5, 8.5, 20.5, 18.5, 30.5, 28.5, 40.5, 38.5]]),
        ("layer:0", [[3, 4], [0.5, -1.5]]),  # the embeddings
        ("layer:-2", [[33, 34], [30.5, 28.5]]),  # layer 3 of 4
    ],
)
def test_every_mode_by_hand(mode, expected):
    assert pool(HIDDEN, MASK, parse_pooling(mode)).tolist() == expected


def test_max_over_negative_values_ignores_zero_padding():
    vectors = torch.tensor([[[-5.0, -2.0], [-3.0, -7.0], [0.0, 0.0]]])
    assert pool((vectors,), torch.tensor([[1, 1, 0]]), Pooling("max")).tolist() == [[-3.0, -2.0]]


def test_token_vectors_for_words():
    assert torch.equal(token_vectors(HIDDEN, parse_pooling("layer:2", per_word=True)), HIDDEN[2])
    assert torch.equal(token_vectors(HIDDEN, parse_pooling(None, per_word=True)), HIDDEN[4])
    assert token_vectors(HIDDEN, parse_pooling("last4-concat", per_word=True)).shape == (2, 3, 8)


def test_parse_defaults_and_errors():
    assert parse_pooling(None).name == "mean"
    assert parse_pooling(None, per_word=True).name == "layer:-1"
    assert parse_pooling(" LAST4-SUM ").name == "last4-sum"
    for bad in ("avg", "layer:", "layer:x", "last3-sum"):
        with pytest.raises(BertkitError, match="unknown --pooling"):
            parse_pooling(bad)
    with pytest.raises(BertkitError, match="one vector per row"):
        parse_pooling("mean", per_word=True)


def test_layer_range_is_checked_against_the_model():
    parse_pooling("layer:6").check_layers(6)
    parse_pooling("layer:-7").check_layers(6)  # -7 is the embeddings of a 6-layer model
    for bad in ("layer:7", "layer:-8"):
        with pytest.raises(BertkitError, match="layers 0..6"):
            parse_pooling(bad).check_layers(6)
    parse_pooling("last4-sum").check_layers(3)  # embeddings + 3 layers are four hidden states
    with pytest.raises(BertkitError, match="needs hidden states of 4 layers"):
        parse_pooling("last4-concat").check_layers(2)


def test_combine_windows():
    vectors, counts = np.array([[1.0, 2.0], [3.0, 6.0]]), [2, 6]
    assert combine_windows(vectors, counts, Pooling("mean")).tolist() == [2.5, 5.0]  # (1*2 + 3*6) / 8, (2*2 + 6*6) / 8
    assert combine_windows(vectors, counts, Pooling("layer", 1)).tolist() == [2.5, 5.0]
    assert combine_windows(vectors, counts, Pooling("max")).tolist() == [3.0, 6.0]
    assert combine_windows(vectors, counts, Pooling("cls")).tolist() == [2.0, 4.0]
    assert combine_windows(vectors[:1], counts[:1], Pooling("mean")).tolist() == [1.0, 2.0]
