"""Models whose rows cannot run packed (bertkit/networks/packed_heads.why_padded): a family whose
position ids packing does not know, an attention packing cannot swap, a decoder. Each says why in
one line and stays padded; the CLI's and the towers' lines: tests/cli/test_packed_training.py."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from tiny_models import build_family  # noqa: E402

from bertkit.networks.packed_heads import pack_encoder, packs, why_padded  # noqa: E402


@pytest.mark.parametrize("family", ["deberta-v2", "modernbert"])
def test_a_family_packing_does_not_know_says_why_and_stays_padded(family, tmp_path):
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(build_family(family, tmp_path / family), num_labels=2)
    reason = why_padded(model)
    assert reason.startswith(f"{model.config.model_type} models run padded")
    assert not pack_encoder(model) and not packs(model)


def test_a_model_loaded_with_an_attention_packing_cannot_swap_says_why_and_stays_padded(tmp_path):
    """flex attention (or flash, on a GPU) loaded through the API keeps its own attention: no packing
    attention ever reads the packing, so the rows run padded, and say so."""
    from transformers import AutoModelForSequenceClassification

    directory = build_family("bert", tmp_path / "bert")
    model = AutoModelForSequenceClassification.from_pretrained(
        directory, num_labels=2, attn_implementation="flex_attention"
    )
    reason = why_padded(model)
    assert reason.startswith("a model loaded with attn_implementation='flex_attention' runs padded"), reason
    assert "attn_implementation='sdpa'" in reason
    assert not pack_encoder(model) and not packs(model)
    for attention in ("sdpa", "eager"):
        model.set_attn_implementation(attention)
        assert why_padded(model) is None
    model.config.is_decoder = True  # causal attention: packing's attends both ways
    assert why_padded(model) == "a decoder runs padded: packing attends both ways within each row"
