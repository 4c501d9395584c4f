"""The body's training step of --recipe setfit (bertkit/networks/contrastive.py): pairs collated side
by side, and the loss equal to a hand computation of SetFit's CosineSimilarityLoss (mean squared
error of the cosine of the two mean-pooled rows against 1 or 0)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


def test_pair_batches_and_the_cosine_loss_equal_a_hand_computation(tiny_bert):
    from transformers import AutoModel, AutoTokenizer

    from bertkit.networks.contrastive import CosineSimilarityTrainer, PairCollator, pair_feature

    tokenizer = AutoTokenizer.from_pretrained(tiny_bert)
    encoder = AutoModel.from_pretrained(tiny_bert).eval()
    texts = ["the film was good", "bad", "a great movie with very fine acting", "it was awful"]
    rows = [dict(tokenizer(text)) for text in texts]
    pairs = [(0, 2, 1.0), (1, 3, 1.0), (0, 1, 0.0)]
    batch = PairCollator(tokenizer.pad_token_id)([pair_feature(rows[a], rows[b], s) for a, b, s in pairs])
    assert batch["input_ids"].shape == (3, len(rows[0]["input_ids"]))  # each side padded to its own longest
    assert batch["input_ids_b"].shape == (3, len(rows[2]["input_ids"]))
    assert batch["labels"].tolist() == [1.0, 1.0, 0.0]

    with torch.no_grad():
        loss = CosineSimilarityTrainer(encoder)(**batch).loss

        def vector(text):  # one row alone: no padding at all
            inputs = tokenizer(text, return_tensors="pt")
            return encoder(**inputs).last_hidden_state[0].mean(0)

        cosines = torch.stack([torch.cosine_similarity(vector(texts[a]), vector(texts[b]), 0) for a, b, _ in pairs])
        expected = ((cosines - torch.tensor([s for _, _, s in pairs])) ** 2).mean()
    assert loss.item() == pytest.approx(expected.item(), abs=1e-5)


def test_the_loss_equals_sentence_transformers_cosine_similarity_loss(tiny_bert):
    st = pytest.importorskip("sentence_transformers")
    try:  # sentence-transformers 6 moved the losses
        from sentence_transformers.sentence_transformer.losses import CosineSimilarityLoss
    except ImportError:
        from sentence_transformers.losses import CosineSimilarityLoss
    from transformers import AutoModel, AutoTokenizer

    from bertkit.networks.contrastive import CosineSimilarityTrainer, PairCollator, pair_feature

    tokenizer = AutoTokenizer.from_pretrained(tiny_bert)
    texts = [("the film was good", "a great movie"), ("bad acting", "the plot was good")]
    labels = torch.tensor([1.0, 0.0])
    model = st.SentenceTransformer(str(tiny_bert), device="cpu").eval()  # mean pooling by default
    with torch.no_grad():
        features = [model.tokenize([a for a, _ in texts]), model.tokenize([b for _, b in texts])]
        theirs = CosineSimilarityLoss(model)(features, labels)
        rows = [(dict(tokenizer(a)), dict(tokenizer(b))) for a, b in texts]
        batch = PairCollator(tokenizer.pad_token_id)([pair_feature(a, b, s) for (a, b), s in zip(rows, [1.0, 0.0])])
        ours = CosineSimilarityTrainer(AutoModel.from_pretrained(tiny_bert).eval())(**batch).loss
    assert ours.item() == pytest.approx(theirs.item(), abs=1e-5)
