"""A reranker (``bertkit finetune rerank``): a cross-encoder reading ``[CLS] query [SEP] passage
[SEP]`` and giving one logit, its relevance; the score is its sigmoid.

Rows: ``query``, ``passage`` (also ``document``), ``label``: 0/1, or a graded relevance (0, 1, 2,
3...). The loss is binary cross-entropy on the logit against the label divided by the training
data's highest label (a grade becomes a soft target in [0, 1]; 0/1 labels stay as they are).

Evaluation: when the training data groups several passages under one query, the reranking measures
over each query's passages (nDCG@10 with linear gains, MRR@10: the first passage with a label above
0; trec_eval's measures and tie rule, computed in bertkit/metrics/retrieval.py), main metric
nDCG@10; otherwise AUC and accuracy at 0.5 (main: AUC). A directory
loads in ``sentence_transformers.CrossEncoder(DIR)``: the same model, the same sigmoid score.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np

from bertkit.data.readers import text_value
from bertkit.errors import BertkitError
from bertkit.metrics.retrieval import auc, reranking_metrics
from bertkit.tasks.base import MULTI_HOT, CardText, Task, TaskOption, require_nonempty
from bertkit.tasks.card_texts import MODEL_DIR_LINE, TRUNCATED
from bertkit.tasks.learned import Examples, Learned
from bertkit.tasks.panels import LOSS_PANEL
from bertkit.tasks.training_spec import LISTWISE, LossSpec, TrainingSpec

QUERIES = ("query", "question", "sentence1", "text")
PASSAGES = ("passage", "document", "sentence2", "text_pair", "context")
LABELS = ("label", "score", "relevance")
COLUMNS_HINT = "give query,passage,label rows (label 0/1 or a graded relevance: 0, 1, 2, ...)"


class RerankTask(Task):
    name = "rerank"
    model_class = "AutoModelForSequenceClassification"
    main_metric = "auc"  # ndcg@10 when the training data groups passages by query (``fit``)
    summary = "a cross-encoder reranker: (query, passage) -> relevance"
    targets = {"labels": MULTI_HOT}  # one soft target per pair: BCE with logits
    prediction_fields = {"score": "relevance: the sigmoid of the one logit"}
    gold_fields = ("label",)
    fold_group_field = "query"  # --folds keeps a query's passages on one side
    card_text = CardText(
        hub_task="text-ranking",
        title="Text Ranking",
        pipeline=False,
        does="scores how relevant a passage is to a query",
        example={"query": "who lives in paris ?", "passage": "john lives in paris ."},
        snippet=f"""import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

{MODEL_DIR_LINE}
tokenizer = AutoTokenizer.from_pretrained(MODEL_DIR)
model = AutoModelForSequenceClassification.from_pretrained(MODEL_DIR).eval()
inputs = tokenizer([$query], [$passage], truncation=True, max_length=$max_length, return_tensors="pt")
with torch.no_grad():  # relevance: the sigmoid of the one logit (sentence_transformers.CrossEncoder's score)
    print(torch.sigmoid(model(**inputs).logits[0, 0]).item())""",
        cli="`bertkit predict DIR --input pairs.jsonl` (query, passage per row), or "
        "`sentence_transformers.CrossEncoder(DIR).predict(pairs)`",
        limitations=TRUNCATED,
    )

    def __init__(self, max_length=None, options=None, labels=None):
        super().__init__(max_length, options, labels)
        if self.options.get("grouped"):
            self.main_metric = "ndcg@10"
        if self.options.get("rerank_loss", "bce") not in ("bce", "listwise"):
            raise BertkitError(
                f"--rerank-loss {self.options['rerank_loss']!r} is not a reranker loss", "use bce or listwise"
            )

    @property
    def listwise(self) -> bool:
        return self.options.get("rerank_loss") == "listwise"

    # learned from the training data and stored with the model; no command offers them as flags
    options_declared = (
        TaskOption(
            "rerank_loss",
            str,
            "bce (each pair alone) or listwise (softmax cross-entropy over each query's passages; "
            "--batch-size then counts queries).",
            ("finetune",),
            "bce",
            panel=LOSS_PANEL,
        ),
        TaskOption("label_max", float, "The highest training label (targets are label / it).", ()),
        TaskOption("grouped", bool, "The training data holds several passages per query.", ()),
    )

    def model_kwargs(self) -> dict:
        return {"num_labels": 1}

    # --- reading -------------------------------------------------------------------------
    def from_records(self, records, source, purpose, hub=False):
        if not records:
            raise BertkitError(f"{source.description} has no rows", COLUMNS_HINT)
        columns = list(records[0])
        query = next((c for c in QUERIES if c in columns), None)
        passage = next((c for c in PASSAGES if c in columns), None)
        if query is None or passage is None:
            raise BertkitError(
                f"{source.description}: no query and passage columns (found {', '.join(columns)})", COLUMNS_HINT
            )
        label = next((c for c in LABELS if c in columns), None)
        if label is None and purpose != "predict":
            raise BertkitError(f"{source.description}: no label column (found {', '.join(columns)})", COLUMNS_HINT)
        rows = []
        for number, record in enumerate(records, 1):
            row = {
                "query": text_value(record, query, number, source.description),
                "passage": text_value(record, passage, number, source.description),
            }
            if label is not None and purpose != "predict":
                row["label"] = relevance(record.get(label), number, label, source.description)
            if "id" in record:
                row["id"] = record["id"]
            rows.append(row)
        require_nonempty(rows, ("query", "passage"), source.description)
        return Examples(rows)

    def fit(self, examples, seen=None) -> Learned:
        labels = [ex["label"] for ex in examples]
        if max(labels) <= 0:
            raise BertkitError("every training label is 0: nothing is relevant", "give pairs labelled 1 (relevant)")
        per_query: dict = {}
        for ex in examples:
            per_query[ex["query"]] = per_query.get(ex["query"], 0) + 1
        grouped = any(n > 1 for n in per_query.values())
        if self.listwise and not grouped:
            raise BertkitError(
                "--rerank-loss listwise needs several passages per query; every query here has one",
                "group passages under their query, or leave out --rerank-loss (bce)",
            )
        return Learned(options={"label_max": max(1.0, max(labels)), "grouped": grouped or None})

    # --- features --------------------------------------------------------------------------
    def preprocess(self, examples, tokenizer, train):
        encoded = tokenizer(
            [ex["query"] for ex in examples],
            [ex["passage"] for ex in examples],
            truncation="longest_first",
            max_length=self.max_length,
        )
        scale = float(self.options.get("label_max") or 1.0)
        features, truncated = [], 0
        for i, example in enumerate(examples):
            feature = {"input_ids": encoded["input_ids"][i], "example_index": i}
            if "token_type_ids" in encoded:
                feature["token_type_ids"] = encoded["token_type_ids"][i]
            truncated += len(feature["input_ids"]) == self.max_length
            if "label" in example:
                feature["labels"] = [min(1.0, example["label"] / scale)]
            features.append(feature)
        stats = {"pairs": len(examples), "truncated": truncated}
        if truncated:
            stats["notices"] = [f"{truncated} of {len(examples)} pairs were cut at --max-length {self.max_length}"]
        if train and self.listwise:
            features = by_query(examples, features, stats)
        return self.reported(features, stats)

    def training_spec(self):
        if self.listwise:
            return TrainingSpec(LISTWISE)
        return TrainingSpec(loss=LossSpec(target=MULTI_HOT))

    # --- decoding and scores -----------------------------------------------------------------------
    def postprocess(self, examples, features, outputs):
        scores = [0.0] * len(examples)
        for feature, logits in zip(features, outputs["logits"]):
            scores[feature["example_index"]] = 1 / (1 + math.exp(-float(np.asarray(logits).reshape(-1)[0])))
        return scores

    def check_eval_examples(self, examples, source):
        """The evaluation data must give the main metric, known before training."""
        placeholder = [0.5] * len(examples)
        try:
            self.metrics(examples, placeholder)
        except BertkitError as exc:
            raise BertkitError(f"{source.description}: {exc.message}", exc.hint) from None

    def metrics(self, examples, predictions):
        gold = [ex["label"] for ex in examples]
        result = {}
        relevant = [g > 0 for g in gold]
        if any(relevant) and not all(relevant):
            result["auc"] = auc(relevant, predictions)
        result["accuracy"] = float(np.mean([(p >= 0.5) == r for p, r in zip(predictions, relevant)]))
        result.update(ranking_scores(examples, predictions))
        if self.main_metric not in result:
            raise BertkitError(
                f"the evaluation data cannot give {self.main_metric} (it needs "
                + (
                    "queries with a relevant passage"
                    if self.main_metric != "auc"
                    else "both relevant and irrelevant pairs"
                )
                + ")",
                "evaluate on query,passage,label rows that hold both kinds",
            )
        return result

    def baseline(self, examples, features=None):
        from bertkit.metrics.baselines import random_ranking

        return random_ranking(examples) if examples else None

    def format_prediction(self, example, prediction):
        row = {"id": example["id"]} if "id" in example else {}
        return {**row, "score": round(float(prediction), 6)}


def by_query(examples: list[dict], features: list[dict], stats: dict) -> list[dict]:
    """Listwise training features: one per query with its pairs and their relevance; a query with
    one passage or none relevant teaches a softmax nothing and is left out (counted, said)."""
    groups: dict = {}
    for example, feature in zip(examples, features):
        groups.setdefault(example["query"], []).append(feature)
    queries, skipped = [], 0
    for pairs in groups.values():
        relevance = [pair["labels"][0] for pair in pairs]
        if len(pairs) < 2 or max(relevance) <= 0:
            skipped += 1
            continue
        longest = max(pairs, key=lambda pair: len(pair["input_ids"]))
        queries.append({"input_ids": longest["input_ids"], "pairs": pairs, "relevance": relevance})
    if not queries:
        raise BertkitError(
            "--rerank-loss listwise: no query has two passages with one relevant",
            "group passages under their query, or leave out --rerank-loss (bce)",
        )
    stats["queries"] = len(queries)
    if skipped:
        stats.setdefault("notices", []).append(
            f"{skipped} queries with one passage or none relevant left out of listwise training"
        )
    return queries


def relevance(value, row: int, field: str, where: str) -> float:
    """A label as a relevance >= 0: 0/1, a grade, or a number written as text."""
    try:
        number = float(value) if not isinstance(value, bool) else float(value)
    except (TypeError, ValueError):
        number = None
    if number is None or not math.isfinite(number) or number < 0:
        raise BertkitError(
            f"{where}: row {row}: {field} {value!r} is not a relevance (0/1 or a graded number >= 0)",
            "label each pair 0 (not relevant) or 1 (relevant), or with a grade 0, 1, 2, ...",
        )
    return number


def ranking_scores(examples: list[dict], scores: list[float]) -> dict:
    """nDCG@10 and MRR@10 (bertkit/metrics/retrieval.py, trec_eval's measures and tie rule) over the
    queries with more than one passage and one labelled above 0; {} when there are none.

    A passage's id is its text, so tied scores rank by it as trec_eval ranks docnos, and the rows'
    order never changes a number. Copies of one passage under one query are told apart by a suffix
    numbered in (label, score) order: their content, not their rows, decides a tie between them too.
    Relevant (MRR): a label above 0, i.e. trec_eval's -l at the smallest positive label (1 for 0/1
    and whole grades)."""
    groups: dict = {}
    for ex, score in zip(examples, scores):
        groups.setdefault(ex["query"], []).append((ex["passage"], float(ex["label"]), float(score)))
    qrels, run = {}, {}
    for query, rows in groups.items():
        if len(rows) < 2 or max(label for _, label, _ in rows) <= 0:
            continue
        copies = Counter(passage for passage, _, _ in rows)
        numbered: Counter = Counter()
        qrels[query], run[query] = {}, {}
        for passage, label, score in sorted(rows):
            key = passage if copies[passage] == 1 else f"{passage}\x00{numbered[passage]}"
            numbered[passage] += 1
            qrels[query][key], run[query][key] = label, score
    if not qrels:
        return {}
    level = min(label for judged in qrels.values() for label in judged.values() if label > 0)
    return {**reranking_metrics(qrels, run, level), "queries": len(qrels)}
