"""BERT's own pre-training (``bertkit pretrain bert``): masked LM + next-sentence prediction.

It reads documents as ``pretrain mlm`` does (text with blank lines between documents, one sentence
or line per row; JSONL records with ``text``) and masks with the same rule and options (the
80/10/10 rule of bertkit/networks/masking.py, ``--mask-rate`` ...), so it is the mlm task with
pairs instead of blocks: ``preprocess`` makes [CLS] A [SEP] B [SEP] pairs of at most ``max_length``
tokens (segment ids 0 for A, 1 for B), half with B the actual next sentences of A, half with B from
another document (bertkit/data/sentence_pairs.py says how they are packed). Training pairs are
drawn with the run's seed; held-out pairs with a fixed one, so every evaluation and every model
is scored on the same pairs (and the same masks).

An example is a document: ``postprocess`` sums the masked-LM statistics of the pairs whose A it
holds, with their NSP loss and correct predictions. ``metrics``: ``mlm_loss`` (per chosen token),
``perplexity``, ``mlm_accuracy``, ``nsp_loss`` and ``nsp_accuracy`` (per pair; NSP is judged on the
masked pairs, as Google's run_pretraining.py evaluates it) and their sum ``loss``, BERT's training
objective and the main metric (minimised).
"""

from __future__ import annotations

import math
import random

import numpy as np

from bertkit.data.sentence_pairs import RANDOM_NEXT, build_pairs
from bertkit.errors import BertkitError
from bertkit.tasks.base import CardText, TaskOption
from bertkit.tasks.card_texts import MODEL_DIR_LINE
from bertkit.tasks.mlm import MaskedLMTask
from bertkit.tasks.training_spec import NEXT_SENTENCE, TrainingSpec

HELD_OUT_SEED = 0  # held-out pairs: the same for every run and model
LABEL = "next_sentence_label"  # transformers' name: 0 = B follows A, 1 = B is random
HELD_OUT_DOCUMENTS = 2  # random B needs another document, in the held-out documents too
ONE_DOCUMENT_HINT = (
    "separate documents with blank lines (at least 2: each random B comes from another document than its A)"
)

CARD = CardText(
    hub_task="fill-mask",
    title="Fill-Mask",
    does="predicts masked word pieces and whether a second text follows the first (BERT's pre-training)",
    example={"text": "john lives in paris.", "text_pair": "he works for google."},
    snippet=f"""import torch
from transformers import AutoTokenizer, BertForPreTraining

{MODEL_DIR_LINE}
tokenizer = AutoTokenizer.from_pretrained(MODEL_DIR)
model = BertForPreTraining.from_pretrained(MODEL_DIR).eval()
with torch.no_grad():
    logits = model(**tokenizer($text, $text_pair, return_tensors="pt")).seq_relationship_logits
print({{"is_next": round(float(logits.softmax(-1)[0, 0]), 3)}})""",
    cli="`bertkit eval DIR --data FILE` (held-out MLM loss, perplexity, NSP accuracy); it is a starting point "
    "for `bertkit finetune TASK --model DIR`, and `bertkit predict` does not apply to it",
    limitations="Trained on sentence pairs of at most $max_length tokens; it has no task head, so fine-tune it "
    "before using it for a task.",
)


class BertPretrainingTask(MaskedLMTask):
    name = "bert"
    model_class = "AutoModelForPreTraining"
    main_metric = "loss"  # mlm_loss + nsp_loss
    output_names = ("mlm_stats", "nsp_logits")
    summary = "masked LM + next-sentence prediction (BERT's pre-training)"
    card_text = CARD
    options_declared = MaskedLMTask.options_declared + (
        TaskOption("pair_seed", int, "Seed of the training pairs (set from --seed).", (), 0),
    )

    # --- reading -------------------------------------------------------------------------
    def read(self, source, purpose):
        documents = super().read(source, purpose)
        _check_documents(documents, source.description)
        return documents

    def split_held_out(self, examples, seed, where):
        share = float(self.options.get("eval_share", 0.1))
        if not 0 <= share < 1:
            raise BertkitError("--eval-share must be in [0, 1) (0: no held-out evaluation)", "e.g. --eval-share 0.1")
        if share == 0:
            return examples, []
        return hold_out_pairs_documents(examples, share, seed, where)

    # --- features --------------------------------------------------------------------------
    def preprocess(self, examples, tokenizer, train):
        frame = pair_frame(tokenizer)
        budget = self.max_length - len(frame["prefix"]) - len(frame["middle"]) - len(frame["suffix"])
        if budget < 2:
            raise BertkitError(
                f"--max-length {self.max_length} leaves no room for two segments beside the pair's special tokens",
                "use a larger --max-length (BERT used 128, then 512)",
            )
        lines = [line for document in examples for line in document["lines"]]
        encoded = tokenizer(lines, add_special_tokens=False, verbose=False)["input_ids"] if lines else []
        documents, cursor = [], 0
        for document in examples:
            documents.append(encoded[cursor : cursor + len(document["lines"])])
            cursor += len(document["lines"])
        if sum(1 for document in documents if any(document)) < 2:
            raise BertkitError(
                f"the {'training' if train else 'held-out'} text has fewer than 2 documents with tokens, so "
                "no random B can be drawn from another document",
                ONE_DOCUMENT_HINT,
            )
        seed = int(self.options.get("pair_seed", 0)) if train else HELD_OUT_SEED
        pairs = build_pairs(documents, budget, seed)
        features = [
            {**encode_pair(frame, pair.a, pair.b), LABEL: pair.label, "example_index": pair.document} for pair in pairs
        ]
        stats = {
            "documents": len(examples),
            "lines": len(lines),
            "tokens": sum(len(ids) for ids in encoded),
            "pairs": len(pairs),
            "random_pairs": sum(pair.label == RANDOM_NEXT for pair in pairs),
            "truncated_pairs": sum(pair.truncated for pair in pairs),
        }
        return self.reported(features, stats)

    def training_spec(self):
        return TrainingSpec(NEXT_SENTENCE, mask_rule=self.rule)

    def directory_sections(self, finished):
        return {
            "pretraining": {
                "objective": "masked LM + next-sentence prediction",
                "mask_rate": self.rule.rate,
                "mask_token_share": self.rule.mask_share,
                "random_token_share": self.rule.random_share,
                "whole_word_masking": self.rule.whole_word,
                "next_sentence_prediction": "trained: 50 % B the actual next sentences, 50 % from another document",
                "pooler": finished.get("pooler"),
                "heads": finished.get("heads"),
            }
        }

    # --- scores ----------------------------------------------------------------------------
    def postprocess(self, examples, features, outputs):
        totals = np.zeros((len(examples), 6))
        for feature, stats, logits in zip(features, outputs["mlm_stats"], outputs["nsp_logits"]):
            log_probs = logits - np.logaddexp(logits[0], logits[1])
            label = feature[LABEL]
            correct = float(np.argmax(logits) == label)
            totals[feature["example_index"]] += [*stats, -float(log_probs[label]), 1.0, correct]
        return list(totals)

    def metrics(self, examples, predictions):
        sums = np.sum(predictions, axis=0) if predictions else np.zeros(6)
        loss_sum, count, correct, nsp_loss_sum, pairs, nsp_correct = sums
        if count == 0 or pairs == 0:
            raise BertkitError(
                "the held-out text is too short: no pair or no masked token to score",
                "give more held-out text (--eval-data) or a larger --eval-share",
            )
        mlm_loss, nsp_loss = loss_sum / count, nsp_loss_sum / pairs
        return {
            "loss": float(mlm_loss + nsp_loss),
            "mlm_loss": float(mlm_loss),
            "perplexity": float(math.exp(min(mlm_loss, 700.0))),
            "mlm_accuracy": float(correct / count),
            "nsp_loss": float(nsp_loss),
            "nsp_accuracy": float(nsp_correct / pairs),
            "masked_tokens": int(count),
            "pairs": int(pairs),
        }

    def baseline(self, examples, features=None):
        from bertkit.metrics.baselines import unigram_and_chance
        from bertkit.tasks.mlm import text_tokens

        return unigram_and_chance(text_tokens(features), [f[LABEL] for f in features]) if features else None

    def format_prediction(self, example, prediction):
        raise _no_predict()

    def check_predictable(self) -> None:
        raise _no_predict()


def _no_predict() -> BertkitError:
    return BertkitError(
        "`bertkit predict` does not apply to a BERT pre-training checkpoint (masked LM + NSP)",
        "score held-out text with `bertkit eval DIR --data FILE`, or fine-tune it: `bertkit finetune pair --model DIR`",
    )


def _check_documents(documents: list, where: str) -> None:
    if len(documents) < 2:
        raise BertkitError(
            f"{where} is one document (no blank line between documents): next-sentence prediction draws each "
            "random B from another document",
            ONE_DOCUMENT_HINT,
        )


def hold_out_pairs_documents(documents: list, share: float, seed: int, where: str) -> tuple[list, list]:
    """(train, held-out): a seeded random ``share`` of whole documents, at least 2 on each side (a
    random B is drawn from another document of the same side: held-out text never meets training text)."""
    if len(documents) < 2 * HELD_OUT_DOCUMENTS:
        raise BertkitError(
            f"{where} has {len(documents)} documents: held-out pairs need {HELD_OUT_DOCUMENTS} documents of their "
            f"own and training {HELD_OUT_DOCUMENTS} (each random B comes from another document)",
            "pass --eval-data FILE, --eval-share 0, or give at least 4 documents",
        )
    order = list(range(len(documents)))
    random.Random(seed).shuffle(order)
    count = min(len(documents) - HELD_OUT_DOCUMENTS, max(HELD_OUT_DOCUMENTS, round(share * len(documents))))
    held = set(order[:count])
    return [d for i, d in enumerate(documents) if i not in held], [d for i, d in enumerate(documents) if i in held]


def pair_frame(tokenizer) -> dict:
    """Where the tokenizer puts its special tokens around a pair, and the segment id of each part:
    ``prefix`` A ``middle`` B ``suffix`` ([CLS] A [SEP] B [SEP] for BERT), read off an encoded probe."""
    a = tokenizer("a", add_special_tokens=False)["input_ids"]
    b = tokenizer("b", add_special_tokens=False)["input_ids"]
    probe = tokenizer("a", "b")
    ids = probe["input_ids"]
    types = probe.get("token_type_ids") or [0] * len(ids)
    start_a = next((i for i in range(len(ids)) if ids[i : i + len(a)] == a), None)
    start_b = (
        None
        if start_a is None
        else next((i for i in range(start_a + len(a), len(ids)) if ids[i : i + len(b)] == b), None)
    )
    if start_b is None:
        raise BertkitError("cannot tell where this tokenizer puts a pair's special tokens", "use a BERT checkpoint")
    end_a, end_b = start_a + len(a), start_b + len(b)
    return {
        "prefix": ids[:start_a],
        "middle": ids[end_a:start_b],
        "suffix": ids[end_b:],
        "types": (types[:start_a], types[start_a], types[end_a:start_b], types[start_b], types[end_b:]),
    }


def encode_pair(frame: dict, a: list, b: list) -> dict:
    """``input_ids`` and ``token_type_ids`` of one pair in the tokenizer's own frame."""
    before, type_a, middle, type_b, after = frame["types"]
    return {
        "input_ids": frame["prefix"] + a + frame["middle"] + b + frame["suffix"],
        "token_type_ids": list(before) + [type_a] * len(a) + list(middle) + [type_b] * len(b) + list(after),
    }
