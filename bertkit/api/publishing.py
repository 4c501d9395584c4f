"""`bertkit push DIR --repo NAME`: upload a model directory (weights, tokenizer, model card,
figures, bertkit.json) to the Hugging Face Hub with huggingface_hub.

Everything that can be checked offline is checked first (a bertkit model, a valid repo id, a
card); then one short probe (bertkit.hub) turns "no network" into a one-line error instead of
minutes of retries.
"""

from __future__ import annotations

import re
from pathlib import Path

from bertkit.model_dir import load_meta
from bertkit.errors import BertkitError

REPO_ID = re.compile(r"^(?:[A-Za-z0-9][A-Za-z0-9._-]{0,95}/)?[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
# Local leftovers that are not part of the model: hidden staging/temp files, trackers' logs.
IGNORE = [".*", "**/.*", "*.logs/**"]


def push(model_dir: str, repo: str, private: bool = False, token: str | None = None,
         message: str = "Upload model trained with bertkit") -> dict:
    meta = load_meta(model_dir)
    if not REPO_ID.match(repo) or "--" in repo or ".." in repo:
        raise BertkitError(f"--repo {repo!r} is not a Hub repository id", "use NAME or OWNER/NAME (letters, digits, "
                           "'-', '_', '.')")
    directory = Path(model_dir)
    if not (directory / "README.md").is_file():
        from bertkit.reporting.build import build_report

        build_report(directory, meta)  # a card, at least (figures when matplotlib is there)
    from bertkit.hub import hub_reachable

    if not hub_reachable():
        raise BertkitError("the Hugging Face Hub is unreachable (offline, or HF_HUB_OFFLINE is set), so nothing "
                           "was pushed", "run `bertkit push` again on a machine with internet access")
    try:
        from huggingface_hub import HfApi

        api = HfApi(token=token)
        url = api.create_repo(repo, private=private, exist_ok=True, repo_type="model")
        commit = api.upload_folder(folder_path=str(directory), repo_id=url.repo_id, repo_type="model",
                                   commit_message=message, ignore_patterns=IGNORE)
    except Exception as exc:  # auth, permissions, network: the Hub's own words, on one line
        detail = " ".join(str(exc).split())[:300]
        raise BertkitError(f"pushing to {repo} failed: {type(exc).__name__}: {detail}",
                           "log in with `hf auth login` or pass --token, and check the repo name") from exc
    return {"repo": url.repo_id, "url": str(url), "commit": getattr(commit, "commit_url", str(commit))}
