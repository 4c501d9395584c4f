"""The embedding losses' table (bertkit/tasks/embedding_losses.py) and their torch functions
(bertkit/networks/embedding_losses.py): one name set; the data's shape picks today's losses; a loss
that does not fit the data, or another loss's option, is one error naming what it needs."""

from __future__ import annotations

import pytest

from bertkit.errors import BertkitError
from bertkit.tasks import embedding_losses as losses
from bertkit.tasks.embedding import EmbeddingTask


def test_every_declared_loss_has_a_function_and_every_function_a_declaration():
    pytest.importorskip("torch")
    from bertkit.networks.embedding_losses import LOSS_FUNCTIONS

    assert set(LOSS_FUNCTIONS) == set(losses.LOSSES)
    assert all(callable(function) for function in LOSS_FUNCTIONS.values())


def test_the_table_is_well_formed():
    assert len(losses.LOSSES) == len(losses.ENTRIES)  # no name twice
    for shape in losses.SHAPES:  # every shape the task reads has exactly one default loss
        assert [e.name for e in losses.ENTRIES if shape in e.picked_for] == [losses.choose(shape, None).name]
    for entry in losses.ENTRIES:
        assert set(entry.picked_for) <= set(entry.reads) <= set(losses.SHAPES)
        assert entry.title and entry.card and entry.help
    names = EmbeddingTask.option_names
    assert {"loss", "matryoshka"} | {o.name for e in losses.ENTRIES for o in e.options} == set(names)
    assert len(names) == len(set(names))
    help_text = next(o for o in EmbeddingTask.options_declared if o.name == "loss").help
    assert all(name in help_text for name in losses.LOSSES)


@pytest.mark.parametrize(
    "kind, loss",
    [(losses.PAIRS, "mnrl"), (losses.TRIPLETS, "mnrl"), (losses.SCORED, "cosent")],
)
def test_the_data_shape_picks_todays_loss(kind, loss):
    learned = EmbeddingTask().fit([], seen={"kind": kind})
    assert learned.options["loss"] == loss
    task = EmbeddingTask(options=learned.options)
    spec = task.training_spec().embedding
    assert spec.objective == loss and spec.scale == 20.0
    assert losses.LOSSES[loss].card in task.card_text.does
    assert EmbeddingTask.card_text.does in task.card_text.does  # the class's own text stays as it was


def test_a_loss_that_does_not_fit_the_data_names_the_columns_it_needs():
    with pytest.raises(BertkitError) as caught:
        EmbeddingTask(options={"loss": "cosent"}).fit([], seen={"kind": losses.PAIRS})
    assert "--loss cosent does not fit pairs" in caught.value.message
    assert "sentence1,sentence2,score" in caught.value.message and "\n" not in caught.value.message
    assert "--loss mnrl" in caught.value.hint


def test_an_option_of_another_loss_is_refused_and_a_replayed_default_is_not():
    with pytest.raises(BertkitError, match="--cache-batch applies to --loss mnrl, not --loss cosent"):
        EmbeddingTask(options={"cache_batch": 2}).fit([], seen={"kind": losses.SCORED})
    with pytest.raises(BertkitError, match="--symmetric, --cache-batch apply to --loss mnrl"):
        EmbeddingTask(options={"cache_batch": 2, "symmetric": True}).fit([], seen={"kind": losses.SCORED})
    # a config.yaml replayed carries every default: not an option given
    assert EmbeddingTask(options={"symmetric": False}).fit([], seen={"kind": losses.SCORED}).options["loss"] == "cosent"
    assert EmbeddingTask(options={"scale": 30.0}).fit([], seen={"kind": losses.SCORED}).options["loss"] == "cosent"


def test_an_unknown_loss_is_refused_before_any_data():
    with pytest.raises(BertkitError, match="'hinge' is not an embedding loss"):
        EmbeddingTask(options={"loss": "hinge"})


def test_the_spec_carries_the_loss_own_options_with_their_defaults():
    spec = EmbeddingTask(options={"loss": "mnrl", "symmetric": True}).training_spec().embedding
    assert spec.option("symmetric") is True and spec.option("cache_batch") is None
    assert spec.option("absent", 7) == 7


@pytest.mark.parametrize("distance", ["euclidean", "cosine", "manhattan"])
@pytest.mark.parametrize("margin", [5.0, 0.5])
def test_triplet_equals_sentence_transformers_triplet_loss(distance, margin):
    torch = pytest.importorskip("torch")
    st = pytest.importorskip("sentence_transformers.sentence_transformer.losses")
    from bertkit.networks.bi_encoder import embedding_loss

    generator = torch.Generator().manual_seed(0)
    anchors, positives, negatives = (torch.randn(6, 8, generator=generator) for _ in range(3))
    theirs = st.TripletLoss(
        model=None, distance_metric=getattr(st.TripletDistanceMetric, distance.upper()), triplet_margin=margin
    ).compute_loss_from_embeddings([anchors, positives, negatives], None)
    task = EmbeddingTask(options={"loss": "triplet", "triplet_distance": distance, "triplet_margin": margin})
    spec = task.training_spec().embedding
    vectors = {"text": anchors, "text_pair": positives, "negative": negatives}
    ours = embedding_loss(spec, vectors, {})
    assert 0 < float(theirs)  # not vacuous: some triplets are inside the margin
    assert float(ours) == pytest.approx(float(theirs), rel=1e-6, abs=1e-7)


def test_triplet_defaults_are_sentence_transformers():
    spec = EmbeddingTask(options={"loss": "triplet"}).training_spec().embedding
    assert spec.option("triplet_margin") == 5.0 and spec.option("triplet_distance") == "euclidean"


def test_triplet_is_chosen_only_when_asked_and_only_for_triplets():
    assert EmbeddingTask().fit([], seen={"kind": losses.TRIPLETS}).options["loss"] == "mnrl"  # today's pick stays
    asked = EmbeddingTask(options={"loss": "triplet"}).fit([], seen={"kind": losses.TRIPLETS})
    assert asked.options["loss"] == "triplet"
    assert "TripletLoss" in EmbeddingTask(options=asked.options).card_text.does
    for kind in (losses.PAIRS, losses.SCORED):
        with pytest.raises(BertkitError, match="it needs anchor,positive,negative columns"):
            EmbeddingTask(options={"loss": "triplet"}).fit([], seen={"kind": kind})
