"""The benchmark data, read from the real files under $BERTKIT_DATA_DIR (default <repo>/../shared/data).

Loaders return plain lists the HF side tokenises itself:
    SST-2  {"sentence", "label": int}     CoNLL  {"tokens", "tags"}
    SQuAD  {"id", "question", "context", "answers": {"text": [...], "answer_start": [...]}}
``check_identical`` proves bertkit's own readers see exactly the same slice.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import tempfile
from pathlib import Path

# SQuAD v1.1 has no train file here: the 48 dev articles are split, the last 10 never trained on.
SQUAD_TRAIN_ARTICLES, SQUAD_EVAL_ARTICLES = 38, 10
SST2_LABELS = ("negative", "positive")  # bertkit's names for SST-2's 0 / 1


def data_dir() -> Path:
    env = os.environ.get("BERTKIT_DATA_DIR")
    return Path(env) if env else (Path(__file__).resolve().parents[2] / "shared" / "data")


def model_path() -> str:
    """The bundled MiniLM-L6 checkpoint: the directory both sides load."""
    from bertkit.models import resolve_model

    return str(resolve_model("minilm"))


def _first(items: list, n: int | None) -> list:
    return items[:n] if n else items


def load_sst2(n_train: int | None, n_eval: int | None):
    def read(name, n):
        with open(data_dir() / "sst2" / name, encoding="utf-8", newline="") as f:
            reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)  # sentences byte-exact
            header = next(reader)
            s, lab = header.index("sentence"), header.index("label")
            return _first([{"sentence": r[s], "label": int(r[lab])} for r in reader], n)

    return read("train.tsv", n_train), read("dev.tsv", n_eval)


def load_conll(n_train: int | None, n_eval: int | None):
    def read(name, n):
        sentences, tokens, tags = [], [], []
        with open(data_dir() / "conll2003" / name, encoding="utf-8") as f:
            for line in list(f) + [""]:
                parts = line.split()
                if parts and not parts[0].startswith("-DOCSTART-"):
                    tokens.append(parts[0])
                    tags.append(parts[-1])
                elif tokens:
                    sentences.append({"tokens": tokens, "tags": tags})
                    tokens, tags = [], []
        return _first(sentences, n)

    return read("train.txt", n_train), read("valid.txt", n_eval)


def _squad_articles(root: Path | None = None) -> list[dict]:
    with open((root or data_dir()) / "squad" / "dev-v1.1.json", encoding="utf-8") as f:
        articles = json.load(f)["data"]
    if len(articles) < SQUAD_TRAIN_ARTICLES + SQUAD_EVAL_ARTICLES:  # the halves must never overlap
        raise ValueError(f"expected >= 48 articles in dev-v1.1.json, found {len(articles)}")
    return articles


def load_squad(n_train: int | None, n_eval: int | None):
    """First n questions of the first 38 articles / of the last 10 (file order)."""

    def flatten(articles):
        return [
            {
                "id": qa["id"],
                "question": qa["question"],
                "context": p["context"],
                "answers": {
                    "text": [a["text"] for a in qa["answers"]],
                    "answer_start": [int(a["answer_start"]) for a in qa["answers"]],
                },
            }
            for art in articles
            for p in art["paragraphs"]
            for qa in p["qas"]
        ]

    articles = _squad_articles()
    return (
        _first(flatten(articles[:SQUAD_TRAIN_ARTICLES]), n_train),
        _first(flatten(articles[-SQUAD_EVAL_ARTICLES:]), n_eval),
    )


def write_squad_split(directory: str, root: str | None = None) -> tuple[str, str]:
    """The same article split as two SQuAD JSON files, for bertkit (it reads files, not lists)."""
    articles = _squad_articles(Path(root) if root else None)
    paths = []
    for name, part in (("train", articles[:SQUAD_TRAIN_ARTICLES]), ("eval", articles[-SQUAD_EVAL_ARTICLES:])):
        path = os.path.join(directory, f"squad-{name}.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"version": "1.1", "data": part}, f)
        paths.append(path)
    return paths[0], paths[1]


LOADERS = {"sst2": load_sst2, "ner": load_conll, "qa": load_squad}
# (HF row -> key, bertkit example -> key): what each side trains / scores on, in comparable form
_KEYS = {
    "sst2": (lambda r: (r["sentence"], SST2_LABELS[r["label"]]), lambda e: (e["text"], e["label"])),
    "ner": (lambda s: (s["tokens"], s["tags"]), lambda e: (e["tokens"], e["tags"])),
    "qa": (
        lambda e: (e["id"], e["question"], e["context"], e["answers"]["text"], e["answers"]["answer_start"]),
        lambda e: (
            e["id"],
            e["question"],
            e["context"],
            [a["text"] for a in e["answers"]],
            [a["start"] for a in e["answers"]],
        ),
    ),
}


def check_identical(workload: str, train: list, evals: list, n_train: int | None, n_eval: int | None) -> dict:
    """Read the same slice through bertkit's readers; raise unless it equals the HF side's lists."""
    from bertkit.data import registry
    from bertkit.data.registry import Source
    from bertkit.tasks import get_task_class

    task_name, dataset = {"sst2": ("cls", "sst2"), "ner": ("ner", "conll2003"), "qa": ("qa", None)}[workload]
    task = get_task_class(task_name)(384, {})
    with tempfile.TemporaryDirectory(prefix="bertkit-bench-check-") as tmp:
        if dataset is None:
            sources = [Source(p, path=Path(p)) for p in write_squad_split(tmp)]
        else:
            sources = [registry.resolve(dataset, split, str(data_dir()), task_name) for split in ("train", "dev")]
        bk = [_first(task.read(src, mode), n) for src, mode, n in zip(sources, ("train", "eval"), (n_train, n_eval))]
    hf_key, bk_key = _KEYS[workload]
    hf_sets, bk_sets = [[hf_key(x) for x in xs] for xs in (train, evals)], [[bk_key(x) for x in xs] for xs in bk]
    digest = [hashlib.sha1(json.dumps(xs, ensure_ascii=False).encode()).hexdigest()[:16] for xs in hf_sets]
    result = {
        "hf_train": len(train),
        "bertkit_train": len(bk[0]),
        "hf_eval": len(evals),
        "bertkit_eval": len(bk[1]),
        "train_fingerprint": digest[0],
        "eval_fingerprint": digest[1],
        "identical": hf_sets == bk_sets,
    }
    if not result["identical"]:
        raise AssertionError(f"{workload}: bertkit and the HF side would not see identical data: {result}")
    return result
