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
