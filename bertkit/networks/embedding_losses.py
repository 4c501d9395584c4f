"""The embedding losses as torch functions, one per entry of bertkit/tasks/embedding_losses.py's
table and under the same name (``LOSS_FUNCTIONS``; a test pins the two name sets equal), as
sentence-transformers' ``losses`` package. Each takes the ``EmbeddingLoss`` spec, the towers'
vectors (``{"text": anchors, "text_pair": positives[, "negative": negatives]}``, (batch, dim) each)
and the batch (text ids, scores) and returns the loss; bi_encoder.py sums it over the Matryoshka
dimensions and runs it under GradCache.

* ``mnrl``: MultipleNegativesRankingLoss (Henderson et al. 2017; sentence-transformers' default):
  cross-entropy over ``scale`` x cosine of each anchor against every positive and negative in the
  batch, its own positive the target. A candidate whose text is the anchor's own positive (a
  duplicate row) is masked, not counted as a negative. ``symmetric``: the positive-to-anchor
  direction too (MultipleNegativesSymmetricRankingLoss).
* ``cosent``: CoSENT (Su 2022, sentence-transformers' CoSENTLoss): log(1 + sum over pairs (i, j)
  with gold_i > gold_j of exp(scale (cos_j - cos_i))).
* ``triplet``: TripletLoss (sentence-transformers'): mean over the rows of max(d(anchor, positive)
  - d(anchor, negative) + margin, 0); d euclidean (the default), 1 - cosine or manhattan.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from bertkit.tasks.training_spec import EmbeddingLoss


def cosine_matrix(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).T


def mnrl_loss(anchors, positives, negatives=None, scale=20.0, positive_ids=None, candidate_ids=None):
    """In-batch negatives. ``positive_ids`` (B) and ``candidate_ids`` (B or 2B, the positives' then
    the negatives' text ids): a candidate other than row i's own positive with the text of row i's
    positive is masked out of row i's negatives."""
    candidates = positives if negatives is None else torch.cat([positives, negatives])
    scores = cosine_matrix(anchors.float(), candidates.float()) * scale
    target = torch.arange(len(anchors), device=scores.device)
    if positive_ids is not None:
        same = positive_ids[:, None] == candidate_ids[None, :]
        same[target, target] = False
        scores = scores.masked_fill(same, float("-inf"))
    return F.cross_entropy(scores, target)


def cosent_loss(first, second, gold, scale=20.0):
    """log(1 + sum_{gold_i > gold_j} exp(scale (cos_j - cos_i)))."""
    scores = F.cosine_similarity(first.float(), second.float()) * scale
    differences = scores[None, :] - scores[:, None]  # [i, j] = s_j - s_i
    ordered = gold[:, None] > gold[None, :]
    differences = differences.masked_fill(~ordered, float("-inf"))
    zero = torch.zeros(1, device=scores.device, dtype=scores.dtype)
    return torch.logsumexp(torch.cat([zero, differences.flatten()]), dim=0)


def mnrl(spec: EmbeddingLoss, vectors: dict, batch: dict) -> torch.Tensor:
    negatives = vectors.get("negative")
    ids = batch.get("text_pair_id")
    candidate_ids = ids if negatives is None or ids is None else torch.cat([ids, batch["negative_id"]])
    loss = mnrl_loss(vectors["text"], vectors["text_pair"], negatives, spec.scale, ids, candidate_ids)
    if spec.symmetric:  # positive -> anchor over the anchors, duplicates of its anchor masked
        anchor_ids = batch.get("text_id")
        back = mnrl_loss(vectors["text_pair"], vectors["text"], None, spec.scale, anchor_ids, anchor_ids)
        loss = (loss + back) / 2
    return loss


def cosent(spec: EmbeddingLoss, vectors: dict, batch: dict) -> torch.Tensor:
    return cosent_loss(vectors["text"], vectors["text_pair"], batch["score"].float(), spec.scale)


DISTANCES = {
    "euclidean": lambda a, b: torch.linalg.vector_norm(a - b, dim=-1),
    "cosine": lambda a, b: 1 - F.cosine_similarity(a, b, dim=-1),
    "manhattan": lambda a, b: (a - b).abs().sum(dim=-1),
}


def triplet(spec: EmbeddingLoss, vectors: dict, batch: dict) -> torch.Tensor:
    distance = DISTANCES[spec.option("triplet_distance", "euclidean")]
    anchors, positives, negatives = (vectors[t].float() for t in ("text", "text_pair", "negative"))
    margin = spec.option("triplet_margin", 5.0)
    return F.relu(distance(anchors, positives) - distance(anchors, negatives) + margin).mean()


LOSS_FUNCTIONS = {"mnrl": mnrl, "cosent": cosent, "triplet": triplet}
