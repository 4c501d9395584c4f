"""Which checkpoints make --recipe setfit's head read unit vectors (probing/setfit_files.py)."""

from __future__ import annotations


def test_a_checkpoint_normalises_only_when_its_sentence_transformers_modules_end_in_normalize(tmp_path):
    import json

    from bertkit.probing.setfit_files import base_normalizes

    def checkpoint(name, modules):
        folder = tmp_path / name
        folder.mkdir()
        if modules is not None:
            (folder / "modules.json").write_text(modules if isinstance(modules, str) else json.dumps(modules))
        return str(folder)

    transformer = {"type": "sentence_transformers.models.Transformer"}
    pooling = {"type": "sentence_transformers.models.Pooling"}
    normalize = {"type": "sentence_transformers.models.Normalize"}
    assert base_normalizes(checkpoint("minilm-like", [transformer, pooling, normalize]))
    assert not base_normalizes(checkpoint("pooled-only", [transformer, pooling]))
    assert not base_normalizes(checkpoint("plain-bert", None))
    assert not base_normalizes(checkpoint("broken", "{not json"))
    assert not base_normalizes(checkpoint("empty", []))
