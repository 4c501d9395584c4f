"""A model card the user edited is never overwritten (eval and report write bertkit's next to it),
a card bertkit did not sign counts as the user's, and `push` uploads a freshly drawn card without
writing into the model directory."""

from __future__ import annotations

import functools
import shutil
from pathlib import Path

from hostile import CLS_CSV


def test_a_card_the_user_edited_is_kept(trained, tmp_path, run_cli):
    from bertkit.reporting.card import NEW_CARD_FILE, card_edited

    model = tmp_path / "model"
    shutil.copytree(trained("cls"), model)
    (tmp_path / "e.csv").write_text(CLS_CSV)
    card = model / "README.md"
    assert not card_edited(card)  # finetune's card is bertkit's own: eval may rewrite it
    code, out, err = run_cli("eval", model, "--data", tmp_path / "e.csv")
    assert code == 0 and not (model / NEW_CARD_FILE).exists() and not card_edited(card), err
    assert "eval-e" in card.read_text()  # rewritten with this evaluation

    edited = card.read_text().replace("## ", "## My notes\n\nHand-written.\n\n## ", 1)
    card.write_text(edited)
    code, out, err = run_cli("eval", model, "--data", tmp_path / "e.csv")
    assert code == 0, err
    assert card.read_text() == edited, "the user's edits were overwritten"
    assert "has edits bertkit did not make, so it was kept" in out + err and NEW_CARD_FILE in out + err
    assert not card_edited(model / NEW_CARD_FILE)

    code, out, err = run_cli("report", model)
    assert code == 0 and card.read_text() == edited, err
    assert "so it was kept" in out and f"model card: {model / NEW_CARD_FILE}" in out, out  # said by report too

    card.unlink()  # the user lets bertkit write it again
    code, out, err = run_cli("eval", model, "--data", tmp_path / "e.csv")
    assert code == 0 and card.is_file() and not card_edited(card), err


def test_a_card_bertkit_did_not_sign_counts_as_the_users(tmp_path):
    from bertkit.reporting.card import NEW_CARD_FILE, card_edited, signed_card, write_card

    card = tmp_path / "README.md"
    card.write_text("# my model\n")
    assert card_edited(card)
    written, notice = write_card(tmp_path, "# bertkit's card\n")
    assert written.name == NEW_CARD_FILE and "was not written by this version of bertkit" in notice
    assert card.read_text() == "# my model\n"
    card.write_text(signed_card("# bertkit's card\n"))
    assert not card_edited(card)
    card.write_text(card.read_text().replace("bertkit's", "my"))
    assert card_edited(card)


def test_push_uploads_a_drawn_card_without_writing_the_model_dir(trained, tmp_path, run_cli, monkeypatch):
    import huggingface_hub

    from bertkit import hub

    model = tmp_path / "model"
    shutil.copytree(trained("cls"), model)
    for name in ("README.md", "report.html"):
        (model / name).unlink()
    shutil.rmtree(model / "figures")
    before = sorted(p.name for p in model.rglob("*"))
    sent = {}

    class Url(str):
        repo_id = "me/model"

    def commit(self, *, operations, **kwargs):
        sent.update({op.path_in_repo: Path(op.path_or_fileobj).read_bytes() for op in operations})
        return "commit"

    monkeypatch.setattr(hub, "hub_reachable", functools.lru_cache(maxsize=1)(lambda: True))
    monkeypatch.setattr(huggingface_hub.HfApi, "whoami", lambda self, *a, **k: {"name": "me"})
    monkeypatch.setattr(huggingface_hub.HfApi, "create_repo", lambda self, *a, **k: Url("https://hf.co/me/model"))
    monkeypatch.setattr(huggingface_hub.HfApi, "create_commit", commit)
    try:
        code, _, err = run_cli("push", model, "--repo", "me/model")
    finally:
        hub.hub_reachable.cache_clear()
    assert code == 0, err
    assert sorted(p.name for p in model.rglob("*")) == before
    assert {"README.md", "report.html", "model.safetensors", "bertkit.json"} <= set(sent)
    assert b"bertkit" in sent["README.md"] and not any(name.startswith(".") for name in sent)
