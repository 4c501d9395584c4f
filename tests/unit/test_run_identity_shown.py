"""A resume refusal names each differing option as the user would write it."""

from bertkit.engine.run_identity import differences


def test_an_unset_option_is_named_unset_not_none():
    found = differences({"lazy_embeddings": None, "batch_size": 8}, {"lazy_embeddings": True, "batch_size": 8})
    assert found == ["--lazy-embeddings unset (checkpoint: True)"]
    nested = differences({"task_options": {"context": None}}, {"task_options": {"context": "document"}})
    assert nested == ["--context unset (checkpoint: document)"]
    assert differences({"seed": 7}, {"seed": 42}) == ["--seed 7 (checkpoint: 42)"]
