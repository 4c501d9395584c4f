"""Sentence embeddings (``bertkit finetune embedding``): a bi-encoder trained on the similarity of
pooled vectors, saved as a sentence-transformers directory.

Training data, one of: pairs ``anchor, positive`` or triplets ``anchor, positive, negative`` (also
``query`` / ``sentence1`` and ``sentence2`` / ``passage``), or scored pairs ``sentence1, sentence2,
score`` (the STS benchmark: ``--data stsb``). The data's shape picks the loss from the table in
bertkit/tasks/embedding_losses.py (pairs and triplets: MultipleNegativesRankingLoss, a candidate
whose text is the row's own positive masked; scored pairs: CoSENT), or ``--loss`` names one that
reads that shape.

A triplet whose negative is its positive teaches nothing but a contradiction: it is dropped,
counted and said. Evaluation reads scored pairs and reports the Spearman correlation of the cosine
with the gold score (retrieval on BEIR directories is `bertkit eval`'s). ``predict`` gives a
text's vector, or a pair's cosine as ``score``.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from bertkit.data.registry import Source
from bertkit.errors import BertkitError
from bertkit.events import notice
from bertkit.metrics.regression import regression_scores
from bertkit.tasks import embedding_losses as losses
from bertkit.tasks.base import PREDICT, TRAIN, CardText, Task, TaskOption, require_nonempty
from bertkit.tasks.card_texts import MODEL_DIR_LINE, TRUNCATED
from bertkit.tasks.learned import Examples, Learned
from bertkit.tasks.panels import LOSS_PANEL
from bertkit.tasks.training_spec import BI_ENCODER, EmbeddingLoss, TrainingSpec

ANCHORS = ("anchor", "query", "sentence1", "text", "sentence")
POSITIVES = ("positive", "sentence2", "passage", "text_pair")
SCORES = ("score", "label", "similarity")
COLUMNS_HINT = "give anchor,positive[,negative] columns (in-batch negatives) or sentence1,sentence2,score (CoSENT)"
SCALE = 20.0  # sentence-transformers' scale for MNRL and CoSENT


class EmbeddingTask(Task):
    name = "embedding"
    model_class = "AutoModel"
    main_metric = "spearman"
    output_names = ("embedding",)
    summary = "sentence embeddings (bi-encoder: in-batch negatives, CoSENT, Matryoshka)"
    targets = {}  # the bi-encoder collator makes each batch (bertkit/networks/bi_encoder.py)
    prediction_fields = {"embedding": "the text's vector (one input text)", "score": "the pair's cosine"}
    gold_fields = ("score",)
    evaluate_before_training = True  # the zero-shot Spearman of the starting encoder, beside the trained one
    card_text = CardText(
        hub_task="sentence-similarity",
        title="Sentence Similarity",
        pipeline=False,
        does="embeds a text as one vector (mean pooling); cosine similarity compares two",
        example={"text": "the film was good"},
        snippet=f"""import torch
from transformers import AutoModel, AutoTokenizer

{MODEL_DIR_LINE}
tokenizer = AutoTokenizer.from_pretrained(MODEL_DIR)
model = AutoModel.from_pretrained(MODEL_DIR).eval()
inputs = tokenizer([$text], truncation=True, max_length=$max_length, return_tensors="pt")
with torch.no_grad():
    hidden = model(**inputs).last_hidden_state
# mean pooling over the real tokens ([CLS] and [SEP] included): sentence_transformers.SentenceTransformer(MODEL_DIR)
# gives the same vector (scaled to unit length where its modules.json ends in Normalize, as the base's did)
mask = inputs["attention_mask"].unsqueeze(-1).float()
print(((hidden * mask).sum(1) / mask.sum(1))[0].tolist())""",
        cli="`bertkit embed DIR --input FILE --output vectors.npy`, or "
        "`sentence_transformers.SentenceTransformer(DIR).encode(texts)`",
        limitations=TRUNCATED,
    )
    # --loss and every loss's own options come from the table (embedding_losses.py); --matryoshka fits any loss
    options_declared = (
        losses.loss_option(),
        *losses.loss_options(),
        TaskOption(
            "matryoshka",
            str,
            "Dimensions the loss is summed over, e.g. 384,256,128,64 (Matryoshka).",
            ("finetune",),
            panel=LOSS_PANEL,
        ),
    )

    def __init__(self, max_length=None, options=None, labels=None):
        super().__init__(max_length, options, labels)
        self.check_training_options()
        if self.options.get("loss") is not None:  # the card says what trained it
            base = type(self).card_text
            self.card_text = replace(base, does=f"{base.does}; trained with {losses.LOSSES[self.options['loss']].card}")

    def check_training_options(self) -> None:
        losses.check_values(self.options)
        self.dims()

    def dims(self) -> tuple | None:
        text = self.options.get("matryoshka")
        if text is None:
            return None
        try:
            dims = tuple(int(part) for part in str(text).split(","))
        except ValueError:
            dims = ()
        if not dims or any(d < 1 for d in dims) or len(set(dims)) != len(dims):
            raise BertkitError(
                f"--matryoshka {text!r} must be distinct positive dimensions joined by commas",
                "e.g. --matryoshka 384,256,128,64",
            )
        return tuple(sorted(dims, reverse=True))

    def check_model_config(self, config, model: str) -> None:
        """A Matryoshka dimension above the encoder's vector cannot be trained."""
        hidden_size = getattr(config, "hidden_size", None) or 0
        above = [d for d in self.dims() or () if d > hidden_size]
        if above:
            raise BertkitError(
                f"--matryoshka {','.join(map(str, above))}: above the {hidden_size} dimensions of {model}'s vectors",
                f"use dimensions up to {hidden_size}",
            )

    # --- reading -------------------------------------------------------------------------
    def from_records(self, records, source: Source, purpose, hub=False):
        if not records:
            raise BertkitError(f"{source.description} has no rows", COLUMNS_HINT)
        columns = list(records[0])
        if purpose == PREDICT:
            return self._prediction_rows(records, columns, source)
        anchor, positive, negative, score = choose_columns(columns, source.description)
        if score is not None:
            examples = scored_pairs(records, anchor, positive, score, source.description)
        else:
            if purpose != TRAIN:
                raise BertkitError(
                    f"{source.description}: evaluating an embedding model needs scored pairs (no score column "
                    f"among {', '.join(columns)})",
                    "give --eval-data with sentence1,sentence2,score rows (STS-style), or leave --eval-data out",
                )
            examples = text_rows(records, (anchor, positive, negative), source.description)
        kind = losses.SCORED if score is not None else (losses.TRIPLETS if negative else losses.PAIRS)
        return Examples(examples, {"kind": kind})

    def _prediction_rows(self, records, columns, source) -> list[dict]:
        first = next((c for c in ANCHORS if c in columns), None)
        second = next((c for c in POSITIVES if c in columns), None)
        if first is None:
            raise BertkitError(f"{source.description}: no text column (found {', '.join(columns)})", COLUMNS_HINT)
        rows = text_rows(records, (first, second, None), source.description)
        for row, record in zip(rows, records):
            if "id" in record:
                row["id"] = record["id"]
        return rows

    def fit(self, examples, seen=None) -> Learned:
        kind = (seen or getattr(examples, "seen", {})).get("kind", losses.PAIRS)
        entry = losses.choose(kind, self.options.get("loss"))
        losses.check_options_fit(entry, self.options)
        return Learned(options={"loss": entry.name, "data_kind": kind})

    # --- features --------------------------------------------------------------------------
    def preprocess(self, examples, tokenizer, train):
        if train:
            return self._training_features(examples, tokenizer)
        features, truncated = [], 0
        for index, example in enumerate(examples):
            for side, field in enumerate(("text", "text_pair")):
                if example.get(field) is None:
                    continue
                ids = tokenizer(example[field], truncation=True, max_length=self.max_length)
                truncated += len(ids["input_ids"]) == self.max_length
                features.append({**encoded(ids), "example_index": index, "side": side})
        return self.reported(features, truncation_stats(truncated, len(features), self.max_length))

    def _training_features(self, examples, tokenizer):
        fields = ("text", "text_pair", "negative")
        present = [f for f in fields if examples and examples[0].get(f) is not None]
        texts = {f: [ex[f] for ex in examples] for f in present}
        encodings = {f: tokenizer(texts[f], truncation=True, max_length=self.max_length) for f in present}
        ids_of_text: dict = {}  # the same text, the same id: the loss masks a duplicate of the positive
        features, truncated = [], 0
        for i, example in enumerate(examples):
            feature = {}
            for field in present:
                prefix = "" if field == "text" else f"{field}_"
                one = {key: encodings[field][key][i] for key in encodings[field]}
                truncated += len(one["input_ids"]) == self.max_length
                feature.update({prefix + k: v for k, v in encoded(one).items()})
                feature[f"{field}_id"] = ids_of_text.setdefault(example[field], len(ids_of_text))
            if example.get("score") is not None:
                feature["score"] = float(example["score"])
            features.append(feature)
        return self.reported(features, truncation_stats(truncated, len(features) * len(present), self.max_length))

    def training_spec(self):
        entry = losses.entry_of(self.options.get("loss", "mnrl"))
        return TrainingSpec(
            BI_ENCODER,
            embedding=EmbeddingLoss(
                objective=entry.name,
                options=losses.option_values(entry, self.options),
                scale=float(self.options.get("scale") or SCALE),
                symmetric=bool(self.options.get("symmetric")),
                cache_batch=self.options.get("cache_batch"),
                dims=self.dims(),
                max_length=self.max_length,
            ),
        )

    def directory_sections(self, finished):
        return {}

    # --- decoding and scores -----------------------------------------------------------------------
    def postprocess(self, examples, features, outputs):
        vectors = [[None, None] for _ in examples]
        for feature, vector in zip(features, outputs["embedding"]):
            vectors[feature["example_index"]][feature["side"]] = np.asarray(vector, dtype=np.float64)
        return [
            {"score": cosine(first, second)} if second is not None else {"embedding": first}
            for first, second in vectors
        ]

    def check_eval_examples(self, examples, source):
        if len({float(ex["score"]) for ex in examples}) < 2:
            raise BertkitError(
                f"{source.description}: every gold score of the evaluation pairs is the same, so Spearman is undefined",
                "evaluate on pairs with different scores",
            )

    def metrics(self, examples, predictions):
        gold = [float(ex["score"]) for ex in examples]
        if len(set(gold)) < 2:
            raise BertkitError(
                "every gold score of the evaluation pairs is the same, so Spearman is undefined",
                "evaluate on pairs with different scores",
            )
        scores = regression_scores(gold, [p["score"] for p in predictions])
        return {"spearman": scores["spearman"], "pearson": scores["pearson"], "pairs": len(examples)}

    def baseline(self, examples, features=None):
        """The same cosine for every pair (Spearman and Pearson 0); the starting model's zero-shot
        score, computed before training, is the baseline that matters (``evaluate_before_training``)."""
        from bertkit.metrics.baselines import constant_mean

        gold = [float(ex["score"]) for ex in examples if ex.get("score") is not None]
        return constant_mean(gold) if len(gold) == len(examples) and gold else None

    def format_prediction(self, example, prediction):
        row = {"id": example["id"]} if "id" in example else {}
        if "score" in prediction:
            return {**row, "score": round(float(prediction["score"]), 6)}
        return {**row, "embedding": [round(float(x), 6) for x in prediction["embedding"]]}


def choose_columns(columns: list, where: str) -> tuple:
    """(anchor, positive, negative or None, score or None): the columns training reads."""
    score = next((c for c in SCORES if c in columns), None)
    if score is not None and {"sentence1", "sentence2"} <= set(columns):
        return "sentence1", "sentence2", None, score
    anchor = next((c for c in ANCHORS if c in columns), None)
    positive = next((c for c in POSITIVES if c in columns), None)
    if anchor is None or positive is None:
        raise BertkitError(
            f"{where}: no anchor and positive columns (found {', '.join(map(str, columns))})", COLUMNS_HINT
        )
    return anchor, positive, ("negative" if "negative" in columns else None), None


def text_rows(records: list[dict], fields: tuple, where: str) -> list[dict]:
    """Rows ``text`` / ``text_pair`` / ``negative`` (None where the column is absent). An empty text
    is an error; a negative equal to its positive is dropped, counted and said."""
    from bertkit.data.readers import text_value

    rows = []
    for number, record in enumerate(records, 1):
        values = [text_value(record, f, number, where) if f else None for f in fields]
        rows.append(dict(zip(("text", "text_pair", "negative"), values)))
    require_nonempty(rows, tuple(k for k, f in zip(("text", "text_pair", "negative"), fields) if f), where)
    if fields[2] is None:
        return rows
    kept = [row for row in rows if row["negative"].strip() != row["text_pair"].strip()]
    if len(kept) < len(rows):
        dropped = len(rows) - len(kept)
        notice("data", f"{where}: {dropped} triplet(s) whose negative is their positive were dropped", rows=dropped)
    if not kept:
        raise BertkitError(f"{where}: every triplet's negative is its positive", "give negatives unlike the positives")
    return kept


def scored_pairs(records: list[dict], first: str, second: str, score: str, where: str) -> list[dict]:
    rows = text_rows(records, (first, second, None), where)
    for number, (row, record) in enumerate(zip(rows, records), 1):
        row["score"] = number_of(record.get(score), number, score, where)
    return rows


def number_of(value, row: int, field: str, where: str) -> float:
    try:
        number = float(value) if not isinstance(value, bool) else None
    except (TypeError, ValueError):
        number = None
    if number is None or not np.isfinite(number):
        raise BertkitError(f"{where}: row {row}: {field} {value!r} is not a number", "give every pair a numeric score")
    return number


def encoded(ids: dict) -> dict:
    return {key: list(ids[key]) for key in ("input_ids", "token_type_ids") if key in ids}


def truncation_stats(truncated: int, texts: int, max_length: int) -> dict:
    stats = {"texts": texts, "truncated": truncated}
    if truncated:
        stats["notices"] = [f"{truncated} of {texts} texts were cut at --max-length {max_length}"]
    return stats


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / max(np.linalg.norm(a) * np.linalg.norm(b), 1e-12))
