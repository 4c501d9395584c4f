"""Masked-LM pre-training (``bertkit pretrain mlm``): continued pre-training on raw text.

Input: a text file (one line of text per line; documents separated by blank lines) or JSON/JSONL
records with a ``text`` field (one document each). ``preprocess`` packs each document's lines,
in order, into blocks of ``max_length`` tokens ([CLS] ... [SEP]); a block never spans two
documents, and only a document's last block is shorter. Masking happens later, per batch, in the
collator (see ``bertkit/networks/masking.py``), so every epoch sees different masks.

An example is a document; ``postprocess`` sums its blocks' loss, chosen-token count and correct
predictions, and ``metrics`` reports held-out ``loss`` (mean cross-entropy per chosen token),
``perplexity`` = exp(loss) and ``accuracy`` (top-1 on chosen tokens). The main metric is ``loss``,
minimised (``greater_is_better = False``): the saved epoch is the one with the lowest held-out loss
(accuracy on a few hundred masked tokens is too noisy to choose by).

Next-sentence prediction is not used: RoBERTa (Liu et al., 2019) found that dropping it matches or
improves downstream results, and blocks of contiguous text need no sentence pairs.
"""

from __future__ import annotations

import math
import random

import numpy as np

from bertkit.data import formats, readers
from bertkit.data.registry import Source, is_any_dataset, read_hub
from bertkit.errors import BertkitError
from bertkit.tasks import card_texts
from bertkit.tasks.base import PREDICT, Task, TaskOption
from bertkit.tasks.training_spec import MASKED_LM, MaskRule, TrainingSpec

TEXT_FIELDS = ("text", "content", "document", "context")
FORMAT_HINT = "give plain text (documents separated by blank lines) or JSONL/Parquet records with a 'text' field"


class MaskedLMTask(Task):
    name = "mlm"
    model_class = "AutoModelForMaskedLM"
    main_metric = "loss"
    output_names = ("mlm_stats",)
    summary = "masked-LM pre-training"
    card_text = card_texts.MLM
    greater_is_better = False  # the saved epoch has the lowest held-out loss
    targets = {}  # the masking collator draws the targets per batch
    options_declared = (
        TaskOption("mask_rate", float, "Share of (non-special) tokens chosen for prediction.", ("pretrain",), 0.15),
        TaskOption("mask_token_share", float, "Of the chosen tokens: share replaced by [MASK].", ("pretrain",), 0.8),
        TaskOption(
            "random_token_share",
            float,
            "Of the chosen tokens: share replaced by a random token (the rest stay unchanged).",
            ("pretrain",),
            0.1,
        ),
        TaskOption(
            "whole_word_masking",
            bool,
            "Choose all sub-words of a word together (WordPiece vocabularies).",
            ("pretrain",),
            False,
        ),
        TaskOption(
            "eval_share",
            float,
            "Share of documents held out when --eval-data is not given (0: none).",
            ("pretrain",),
            0.1,
        ),
    )
    directory_kind = "pretrain"
    evaluate_before_training = True  # the report says how much pre-training changed the held-out loss

    def __init__(self, max_length: int | None = None, options: dict | None = None, labels: list | None = None):
        super().__init__(max_length, options, labels)
        self.rule = MaskRule(
            self.options.get("mask_rate", 0.15),
            self.options.get("mask_token_share", 0.8),
            self.options.get("random_token_share", 0.1),
            bool(self.options.get("whole_word_masking", False)),
        ).validate()

    def check_predictable(self) -> None:
        raise _no_predict()

    # --- reading -------------------------------------------------------------------------
    def read(self, source: Source, purpose: str) -> list[dict]:
        if purpose == PREDICT:
            raise _no_predict()
        if source.path is None and is_any_dataset(source):  # a Hub id or a dataset directory: its text rows
            return read_hub(source, self.from_records, purpose)
        if source.path is None:
            raise BertkitError(f"{source.description}: masked-LM pre-training reads local text files", FORMAT_HINT)
        fmt = formats.of(source.path)
        if fmt is not None and fmt.typed:  # records (JSON, JSON Lines, Parquet): their text field
            return self.from_records(fmt.read(source.path, source=source.description), source, purpose)
        documents = split_documents(readers.read_text(source.path))
        if not documents:
            raise BertkitError(f"{source.description} has no text", FORMAT_HINT)
        return documents

    def from_records(self, records, source, purpose, hub=False):
        if purpose == PREDICT:
            raise _no_predict()
        columns = list(records[0])
        field = next((name for name in TEXT_FIELDS if name in columns), None)
        if field is None:
            raise BertkitError(f"{source.description}: no text field (found {', '.join(columns)})", FORMAT_HINT)
        documents = [
            {"lines": lines}
            for lines in (
                [
                    line.strip()
                    for line in readers.text_value(r, field, row, source.description).splitlines()
                    if line.strip()
                ]
                for row, r in enumerate(records, 1)
            )
            if lines
        ]
        if not documents:
            raise BertkitError(f"{source.description}: every '{field}' is empty", FORMAT_HINT)
        return documents

    # --- features --------------------------------------------------------------------------
    def preprocess(self, examples, tokenizer, train):
        lines = [line for document in examples for line in document["lines"]]
        encoded = tokenizer(lines, add_special_tokens=False, verbose=False)["input_ids"] if lines else []
        prefix, suffix = special_frame(tokenizer)
        budget = self.max_length - len(prefix) - len(suffix)
        with_types = "token_type_ids" in tokenizer.model_input_names
        features, cursor, tokens = [], 0, 0
        for index, document in enumerate(examples):
            stream = [token for ids in encoded[cursor : cursor + len(document["lines"])] for token in ids]
            cursor += len(document["lines"])
            tokens += len(stream)
            for start in range(0, len(stream), budget):
                ids = prefix + stream[start : start + budget] + suffix
                feature = {"input_ids": ids, "example_index": index}
                if with_types:
                    feature["token_type_ids"] = [0] * len(ids)
                features.append(feature)
        return self.reported(
            features, {"documents": len(examples), "lines": len(lines), "tokens": tokens, "blocks": len(features)}
        )

    def split_held_out(self, examples, seed, where):
        share = float(self.options.get("eval_share", 0.1))
        if not 0 <= share < 1:
            raise BertkitError("--eval-share must be in [0, 1) (0: no held-out evaluation)", "e.g. --eval-share 0.1")
        return hold_out_documents(examples, share, seed, where) if share > 0 else (examples, [])

    def training_spec(self):
        return TrainingSpec(MASKED_LM, mask_rule=self.rule)

    def directory_sections(self, finished):
        return {
            "pretraining": {
                "objective": "masked LM",
                "mask_rate": self.rule.rate,
                "mask_token_share": self.rule.mask_share,
                "random_token_share": self.rule.random_share,
                "whole_word_masking": self.rule.whole_word,
                "next_sentence_prediction": "not used (RoBERTa: dropping NSP matches or improves results)",
                "pooler": finished.get("pooler"),
            }
        }

    def postprocess(self, examples, features, outputs):
        totals = np.zeros((len(examples), 3))
        for feature, stats in zip(features, outputs["mlm_stats"]):
            totals[feature["example_index"]] += stats
        return list(totals)

    def metrics(self, examples, predictions):
        loss_sum, count, correct = np.sum(predictions, axis=0) if predictions else (0.0, 0.0, 0.0)
        if count == 0:
            raise BertkitError(
                "the held-out text is too short: no token was chosen for masking",
                "give more held-out text (--eval-data) or a larger --eval-share",
            )
        loss = loss_sum / count
        return {
            "loss": float(loss),
            "perplexity": float(math.exp(min(loss, 700.0))),
            "accuracy": float(correct / count),
            "masked_tokens": int(count),
        }

    def baseline(self, examples, features=None):
        from bertkit.metrics.baselines import unigram

        return unigram(text_tokens(features)) if features else None

    def format_prediction(self, example, prediction):
        raise _no_predict()


def text_tokens(features: list[dict]) -> list[list[int]]:
    """The blocks' token ids without their special tokens (those that open and close every block:
    [CLS] and [SEP], <s> and </s>), which are never masked."""
    special = {f["input_ids"][0] for f in features} | {f["input_ids"][-1] for f in features}
    return [[token for token in f["input_ids"] if token not in special] for f in features]


def _no_predict() -> BertkitError:
    return BertkitError(
        "`bertkit predict` does not apply to a masked-LM checkpoint",
        "score held-out text with `bertkit eval DIR --data FILE`, or fine-tune it: `bertkit finetune cls --model DIR`",
    )


def special_frame(tokenizer) -> tuple[list[int], list[int]]:
    """The special tokens the tokenizer puts before and after one text ([CLS] / [SEP] for BERT,
    <s> / </s> for RoBERTa), read off an encoded probe word."""
    bare = tokenizer("a", add_special_tokens=False)["input_ids"]
    full = tokenizer("a")["input_ids"]
    start = next((i for i in range(len(full) - len(bare) + 1) if full[i : i + len(bare)] == bare), None)
    if start is None:
        raise BertkitError("cannot tell where this tokenizer puts its special tokens", "use a BERT-family checkpoint")
    return full[:start], full[start + len(bare) :]


def split_documents(text: str) -> list[dict]:
    """Documents (lists of non-empty lines) from text where blank lines separate documents."""
    documents, current = [], []
    for line in text.splitlines():
        if line.strip():
            current.append(line.strip())
        elif current:
            documents.append({"lines": current})
            current = []
    if current:
        documents.append({"lines": current})
    return documents


def hold_out_documents(documents: list[dict], share: float, seed: int, where: str) -> tuple[list, list]:
    """(train, held-out): a seeded random ``share`` of whole documents, at least one, never all."""
    if len(documents) < 2:
        raise BertkitError(
            f"{where} is one document (no blank lines), so none can be held out for evaluation",
            "separate documents with blank lines, pass --eval-data FILE, or --eval-share 0",
        )
    order = list(range(len(documents)))
    random.Random(seed).shuffle(order)
    held = set(order[: min(len(documents) - 1, max(1, round(share * len(documents))))])
    return ([d for i, d in enumerate(documents) if i not in held], [d for i, d in enumerate(documents) if i in held])
