"""`bertkit datasets`: the known dataset names, their task and where they load from; and the SQuAD
retrieval set (examples/build_squad_retrieval.py) written as a BEIR directory."""

from __future__ import annotations

import json
from pathlib import Path

from bertkit.data import readers, registry
from bertkit.errors import BertkitError
from bertkit.model_dir import check_output_dir, staged_output
from bertkit.model_dir.writer_lock import writes_outputs

PAIRS_FILE = "train-pairs.jsonl"


def list_datasets(data_dir: str | None = None) -> list[dict]:
    return registry.describe_all(data_dir)


@writes_outputs
def build_squad_retrieval(squad_file: str, output: str, test_articles: int | None = None) -> dict:
    """A BEIR directory at ``output`` (new; written all-or-nothing): corpus.jsonl, queries.jsonl,
    qrels/train.tsv and qrels/test.tsv (the held-out articles), and ``train-pairs.jsonl`` (question,
    paragraph) of the train articles for `finetune embedding`. Returns the counts."""
    from bertkit.data.squad_retrieval import TEST_ARTICLES, build

    target = Path(output).expanduser().resolve()
    if target.is_dir() and any(target.iterdir()):  # never replaced: a BEIR directory is no bertkit model
        raise BertkitError(f"the output directory {output} exists and is not empty", "name a new directory")
    check_output_dir(target, overwrite=False)
    source = Path(squad_file).expanduser()
    if not source.is_file():
        raise BertkitError(f"no such file: {squad_file}", "point at SQuAD's dev-v1.1.json")
    try:
        squad = readers.parse_json(readers.read_text(source))
    except json.JSONDecodeError as exc:
        raise BertkitError(
            f"{source}: invalid JSON at line {exc.lineno} ({exc.msg})", "give SQuAD's JSON file"
        ) from exc
    built = build(squad, TEST_ARTICLES if test_articles is None else test_articles, str(source))
    with staged_output(target) as staging:
        _jsonl(staging / "corpus.jsonl", built.corpus)
        _jsonl(staging / "queries.jsonl", built.queries)
        (staging / "qrels").mkdir()
        for split, rows in built.qrels.items():
            lines = "".join(f"{q}\t{p}\t{grade}\n" for q, p, grade in rows)
            (staging / "qrels" / f"{split}.tsv").write_text("query-id\tcorpus-id\tscore\n" + lines, encoding="utf-8")
        _jsonl(staging / PAIRS_FILE, built.pairs)
    return {
        "written_to": str(target),
        "passages": len(built.corpus),
        "queries": {split: len(rows) for split, rows in built.qrels.items()},
        "articles": built.articles,
        "pairs": len(built.pairs),
    }


def _jsonl(path: Path, rows: list[dict]) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
