"""`bertkit push DIR --repo NAME`: upload a model directory (weights, tokenizer, model card,
figures, bertkit.json) to the Hugging Face Hub with huggingface_hub, in one commit.

Everything that can be checked is checked before anything is written or sent: a bertkit model,
a valid repo id, the Hub reachable (one short probe, bertkit.hub, instead of minutes of
retries) and a token the Hub accepts. The model directory itself is never written: a directory
without a card gets one drawn in a temporary directory and uploaded from there.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from bertkit.errors import BertkitError
from bertkit.model_dir import load_meta

REPO_ID = re.compile(r"^(?:[A-Za-z0-9][A-Za-z0-9._-]{0,95}/)?[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
# Local leftovers that are not part of the model: hidden staging/temp files, trackers' logs.
IGNORE = [".*", "**/.*", "*.logs/**"]
LOGIN_HINT = "log in with `hf auth login` or pass --token, and check the repo name"


def push(
    model_dir: str,
    repo: str,
    private: bool = False,
    token: str | None = None,
    message: str = "Upload model trained with bertkit",
) -> dict:
    meta = load_meta(model_dir)
    if meta.get("kind") == "multi-head":  # bertkit finetune multi: no Hub card or layout for it yet
        raise BertkitError(
            "bertkit push does not take a multi-head model yet",
            "export one head (bertkit export head DIR NAME) and push that directory",
        )
    if not REPO_ID.match(repo) or "--" in repo or ".." in repo:
        raise BertkitError(
            f"--repo {repo!r} is not a Hub repository id", "use NAME or OWNER/NAME (letters, digits, '-', '_', '.')"
        )
    from bertkit.hub import hub_reachable

    if not hub_reachable():
        raise BertkitError(
            "the Hugging Face Hub is unreachable (offline, or HF_HUB_OFFLINE is set), so nothing was pushed",
            "run `bertkit push` again on a machine with internet access",
        )
    from huggingface_hub import CommitOperationAdd, HfApi

    api = HfApi(token=token)
    _hub_call(repo, "checking the token", api.whoami)  # no token, or a rejected one: before any work
    directory = Path(model_dir)
    with tempfile.TemporaryDirectory(prefix="bertkit-push-") as scratch:
        files = {**_model_files(directory), **_generated_card(directory, meta, Path(scratch))}
        url = _hub_call(
            repo, "creating the repository", api.create_repo, repo, private=private, exist_ok=True, repo_type="model"
        )
        operations = [CommitOperationAdd(path_in_repo=name, path_or_fileobj=str(path)) for name, path in files.items()]
        commit = _hub_call(
            repo,
            "uploading",
            api.create_commit,
            repo_id=url.repo_id,
            repo_type="model",
            operations=operations,
            commit_message=message,
        )
    return {"repo": url.repo_id, "url": str(url), "commit": getattr(commit, "commit_url", str(commit))}


def _hub_call(repo: str, doing: str, call, *args, **kwargs):
    """Auth, permissions, network: the Hub's own words, on one line."""
    try:
        return call(*args, **kwargs)
    except Exception as exc:
        detail = " ".join(str(exc).split())[:300]
        raise BertkitError(
            f"pushing to {repo} failed while {doing}: {type(exc).__name__}: {detail}", LOGIN_HINT
        ) from exc


def _model_files(directory: Path) -> dict[str, Path]:
    """Path in the repository -> local file, as upload_folder would choose them."""
    from huggingface_hub.utils import filter_repo_objects

    names = [p.relative_to(directory).as_posix() for p in sorted(directory.rglob("*")) if p.is_file()]
    return {name: directory / name for name in filter_repo_objects(names, ignore_patterns=IGNORE)}


def _generated_card(directory: Path, meta: dict, scratch: Path) -> dict[str, Path]:
    """No README.md: draw the card, report and figures in ``scratch`` (the model directory stays
    as it is) from links to what they are drawn from; returns them as repository files."""
    if (directory / "README.md").is_file():
        return {}
    from bertkit.reporting.build import build_report

    for source in [directory / "history.jsonl", *directory.glob("eval-*.json")]:
        if source.is_file():
            (scratch / source.name).symlink_to(source.resolve())
    drawn = build_report(scratch, meta, name=directory.name)
    made = [Path(drawn["card"]), Path(drawn["report"]), *map(Path, drawn["figures"])]
    return {path.relative_to(scratch).as_posix(): path for path in made}
