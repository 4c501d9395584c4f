"""The bi-encoder's losses against hand computations on a 3x3 batch, GradCache against the plain
batch (same gradients), duplicate-text masking and Matryoshka truncation (bertkit/networks/bi_encoder.py)."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from bertkit.networks.bi_encoder import BiEncoderCollator, BiEncoderTrainer, embedding_loss  # noqa: E402
from bertkit.networks.embedding_losses import cosent_loss, mnrl_loss  # noqa: E402
from bertkit.tasks.training_spec import EmbeddingLoss  # noqa: E402

A = [[1.0, 0.0], [0.6, 0.8], [0.0, 1.0]]
P = [[0.8, 0.6], [1.0, 0.0], [0.0, 2.0]]


def cos(u, v):
    return sum(a * b for a, b in zip(u, v)) / math.sqrt(sum(a * a for a in u) * sum(b * b for b in v))


def hand_mnrl(anchors, candidates, scale, masked=()):
    total = 0.0
    for i, a in enumerate(anchors):
        logits = [scale * cos(a, c) if (i, j) not in masked else -math.inf for j, c in enumerate(candidates)]
        total += -(logits[i] - math.log(sum(math.exp(x) for x in logits if x > -math.inf)))
    return total / len(anchors)


def test_mnrl_equals_a_hand_computation_on_a_3x3_batch():
    got = mnrl_loss(torch.tensor(A), torch.tensor(P), scale=20.0)
    assert float(got) == pytest.approx(hand_mnrl(A, P, 20.0), rel=1e-5)


def test_mnrl_with_negatives_scores_every_negative_too():
    negatives = [[0.0, 1.0], [1.0, 1.0], [1.0, 0.0]]
    got = mnrl_loss(torch.tensor(A), torch.tensor(P), torch.tensor(negatives), scale=5.0)
    assert float(got) == pytest.approx(hand_mnrl(A, P + negatives, 5.0), rel=1e-5)


def test_a_duplicate_positive_is_not_a_negative_of_its_twin():
    # rows 0 and 2 have the same positive text (id 7): each one's twin is masked, the rest counts
    # (the same text, the same vector: unmasked, row 0 would count its own positive as a negative)
    twins = [P[0], P[1], P[0]]
    ids = torch.tensor([7, 3, 7])
    got = mnrl_loss(torch.tensor(A), torch.tensor(twins), scale=20.0, positive_ids=ids, candidate_ids=ids)
    assert float(got) == pytest.approx(hand_mnrl(A, twins, 20.0, masked={(0, 2), (2, 0)}), rel=1e-5)
    unmasked = float(mnrl_loss(torch.tensor(A), torch.tensor(twins), scale=20.0))
    assert unmasked == pytest.approx(hand_mnrl(A, twins, 20.0), rel=1e-5) and unmasked > float(got) + 0.1


def test_cosent_equals_a_hand_computation_on_a_3x3_batch():
    gold = [3.0, 1.0, 2.0]
    s = [20.0 * cos(a, p) for a, p in zip(A, P)]
    terms = [math.exp(s[j] - s[i]) for i in range(3) for j in range(3) if gold[i] > gold[j]]
    got = cosent_loss(torch.tensor(A), torch.tensor(P), torch.tensor(gold), 20.0)
    assert float(got) == pytest.approx(math.log(1 + sum(terms)), rel=1e-5)


def test_matryoshka_sums_the_loss_over_the_vectors_cut_to_each_dimension():
    torch.manual_seed(0)
    vectors = {"text": torch.randn(3, 8), "text_pair": torch.randn(3, 8)}
    spec = EmbeddingLoss(dims=(8, 4, 2))
    expected = sum(float(mnrl_loss(vectors["text"][:, :d], vectors["text_pair"][:, :d])) for d in (8, 4, 2))
    assert float(embedding_loss(spec, vectors, {})) == pytest.approx(expected, rel=1e-5)
    # the cut is the first d components: the 2-dimensional term alone is the loss of those columns
    assert float(embedding_loss(EmbeddingLoss(dims=(2,)), vectors, {})) == pytest.approx(
        float(mnrl_loss(vectors["text"][:, :2], vectors["text_pair"][:, :2])), rel=1e-6
    )


def _batch(tiny_bert, texts, pairs, negatives=None):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_bert)
    features = []
    ids: dict = {}
    for i, (a, p) in enumerate(zip(texts, pairs)):
        ea, ep = tokenizer(a), tokenizer(p)
        feature = {
            "input_ids": ea["input_ids"],
            "token_type_ids": ea["token_type_ids"],
            "text_pair_input_ids": ep["input_ids"],
            "text_pair_token_type_ids": ep["token_type_ids"],
            "text_id": ids.setdefault(a, len(ids)),
            "text_pair_id": ids.setdefault(p, len(ids)),
        }
        if negatives:
            en = tokenizer(negatives[i])
            feature.update(negative_input_ids=en["input_ids"], negative_token_type_ids=en["token_type_ids"])
            feature["negative_id"] = ids.setdefault(negatives[i], len(ids))
        features.append(feature)
    return BiEncoderCollator(tokenizer.pad_token_id)(features)


def _gradients(tiny_bert, spec, batch, scale=1.0, packed=False):
    """``packed``: with the engine's CPU training kernels on, whose attention runs the towers packed."""
    from transformers import AutoModel

    from bertkit.engine.cpu_kernels import CpuTrainingKernels
    from bertkit.networks.packed import can_pack

    encoder = AutoModel.from_pretrained(tiny_bert)
    encoder.eval()  # no dropout: the two passes must see the same network
    trainer = BiEncoderTrainer(encoder, spec)
    if packed:
        CpuTrainingKernels(trainer).apply()  # eval mode stays: FastDropout does nothing there
    assert can_pack(encoder) == packed
    loss = trainer(**batch).loss
    (loss * scale).backward()
    return float(loss.detach()), {n: p.grad.clone() for n, p in encoder.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("packed", [False, True])
def test_gradcache_gives_the_gradients_of_the_whole_batch(tiny_bert, symmetric, packed):
    """Also with the towers packed (the CPU training kernels on): the cached mini-batches are packed
    on their own, and still give the whole padded batch's gradients."""
    texts = ["the film was good", "the plot was bad", "john lives in paris", "mary visited berlin", "it was fine"]
    pairs = ["it was a great movie", "the story was awful", "john lives in france", "mary went to germany", "ok"]
    negatives = ["the plot was bad", "a good film", "mary lives in london", "john went to paris", "not fine"]
    batch = _batch(tiny_bert, texts, pairs, negatives)
    whole_loss, whole = _gradients(tiny_bert, EmbeddingLoss(symmetric=symmetric, dims=(32, 8)), batch, 0.5)
    cached_loss, cached = _gradients(
        tiny_bert, EmbeddingLoss(symmetric=symmetric, dims=(32, 8), cache_batch=2), batch, 0.5, packed
    )
    assert cached_loss == pytest.approx(whole_loss, abs=1e-6)
    assert whole.keys() == cached.keys() and whole
    for name in whole:
        assert torch.allclose(cached[name], whole[name], atol=1e-5, rtol=1e-4), name


def test_the_task_gives_one_text_one_id_so_the_loss_can_mask_its_duplicates(tiny_bert):
    from transformers import AutoTokenizer

    from bertkit.tasks.embedding import EmbeddingTask

    rows = [
        {"text": "the film was good", "text_pair": "it was great", "negative": None},
        {"text": "the plot was bad", "text_pair": "it was awful", "negative": None},
        {"text": "a good film", "text_pair": "it was great", "negative": None},
    ]
    features = EmbeddingTask().preprocess(rows, AutoTokenizer.from_pretrained(tiny_bert), train=True)
    ids = [f["text_pair_id"] for f in features]
    assert ids[0] == ids[2] != ids[1]
    batch = BiEncoderCollator(0)(features)
    assert batch["text_pair_id"].tolist() == ids and "negative_input_ids" not in batch
