"""SQuAD v1.1 on the HF side, as run_qa.py: windows of 384 with stride 128, offsets kept for the
context only, utils_qa's top-20 x top-20 post-processing (``loop_decode``), SQuAD EM/F1."""

from __future__ import annotations

import collections
import time

import numpy as np

from benchmarks.hf_trainer import RECIPES, predict_in_order, prepare, train_and_eval

MAX_LENGTH, STRIDE, N_BEST, MAX_ANSWER = 384, 128, 20, 30


def loop_decode(
    examples, features, start_logits, end_logits, n_best_size: int = N_BEST, max_answer_length: int = MAX_ANSWER
) -> dict:
    """utils_qa.postprocess_qa_predictions (SQuAD v1): per window, the top-n start x top-n end double
    loop, span filters, sort, "empty" fallback, softmax. examples: "id", "context"; features:
    "example_id", "offset_mapping" (None outside the context). Returns {id: best prediction dict}
    (text, score, probability), the score kept so tests can compare it."""
    index_of = {example["id"]: i for i, example in enumerate(examples)}
    windows = collections.defaultdict(list)
    for f, feature in enumerate(features):
        windows[index_of[feature["example_id"]]].append(f)
    best = collections.OrderedDict()
    for e, example in enumerate(examples):
        prelim = []
        for f in windows[e]:
            s, t, offsets = start_logits[f], end_logits[f], features[f]["offset_mapping"]
            for i in np.argsort(s)[-1 : -n_best_size - 1 : -1].tolist():
                for j in np.argsort(t)[-1 : -n_best_size - 1 : -1].tolist():
                    if i >= len(offsets) or j >= len(offsets) or offsets[i] is None or offsets[j] is None:
                        continue
                    if j < i or j - i + 1 > max_answer_length:
                        continue
                    prelim.append({"offsets": (offsets[i][0], offsets[j][1]), "score": s[i] + t[j]})
        predictions = sorted(prelim, key=lambda p: p["score"], reverse=True)[:n_best_size]
        for p in predictions:
            p["text"] = example["context"][p["offsets"][0] : p["offsets"][1]]
        if not predictions or (len(predictions) == 1 and predictions[0]["text"] == ""):
            predictions.insert(0, {"text": "empty", "score": 0.0})
        scores = np.array([p["score"] for p in predictions])
        probabilities = np.exp(scores - scores.max())
        for p, probability in zip(predictions, probabilities / probabilities.sum()):
            p["probability"] = float(probability)
        best[example["id"]] = predictions[0]
    return best


def squad_em_f1(predictions: dict[str, str], examples: list) -> dict:
    """SQuAD v1.1 EM / F1 in percent via bertkit's copy of the official script (no Hub download)."""
    from bertkit.metrics.squad import squad_scores

    scores = squad_scores(predictions, {ex["id"]: list(ex["answers"]["text"]) for ex in examples})
    return {"exact_match": scores["exact_match"], "f1": scores["f1"]}


def _features(tokenizer, pad: bool):
    """run_qa's prepare_train_features / prepare_validation_features (right padding, BERT tokenizers)."""

    def tokenize(batch):
        return tokenizer(
            [q.lstrip() for q in batch["question"]],
            batch["context"],
            truncation="only_second",
            max_length=MAX_LENGTH,
            stride=STRIDE,
            return_overflowing_tokens=True,
            return_offsets_mapping=True,
            padding="max_length" if pad else False,
        )

    def train(batch):
        encoded = tokenize(batch)
        samples = encoded.pop("overflow_to_sample_mapping")
        encoded["start_positions"], encoded["end_positions"] = [], []
        for i, offsets in enumerate(encoded.pop("offset_mapping")):
            cls = encoded["input_ids"][i].index(tokenizer.cls_token_id)
            sequence = encoded.sequence_ids(i)
            answers = batch["answers"][samples[i]]
            start_char = answers["answer_start"][0]
            end_char = start_char + len(answers["text"][0])
            first = sequence.index(1)
            last = len(sequence) - 1 - sequence[::-1].index(1)
            if not (offsets[first][0] <= start_char and offsets[last][1] >= end_char):
                start = end = cls  # the answer is not fully inside this window
            else:
                while first < len(offsets) and offsets[first][0] <= start_char:
                    first += 1
                while offsets[last][1] >= end_char:
                    last -= 1
                start, end = first - 1, last + 1
            encoded["start_positions"].append(start)
            encoded["end_positions"].append(end)
        return encoded

    def validation(batch):
        encoded = tokenize(batch)
        samples = encoded.pop("overflow_to_sample_mapping")
        encoded["example_id"] = [batch["id"][k] for k in samples]
        encoded["offset_mapping"] = [
            [o if s == 1 else None for o, s in zip(offsets, encoded.sequence_ids(i))]
            for i, offsets in enumerate(encoded["offset_mapping"])
        ]
        return encoded

    return train, validation


def run(side: str, train_examples: list, eval_examples: list, model_path: str, hp: dict) -> dict:
    """hf_default = run_qa's pad_to_max_length (every window 384, default_data_collator); the best
    recipes pad per batch. Evaluation: Trainer.predict, loop_decode, squad_em_f1, all timed."""
    from datasets import Dataset
    from transformers import (
        AutoModelForQuestionAnswering,
        AutoTokenizer,
        DataCollatorWithPadding,
        default_data_collator,
        set_seed,
    )

    prepare()
    set_seed(hp["seed"])
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModelForQuestionAnswering.from_pretrained(model_path)
    pad = RECIPES[side]["pad"]
    prepare_train, prepare_validation = _features(tokenizer, pad)
    columns = ["id", "question", "context", "answers"]
    train_ds = Dataset.from_list(train_examples).map(prepare_train, batched=True, remove_columns=columns)
    eval_raw = Dataset.from_list(eval_examples)
    eval_ds = eval_raw.map(prepare_validation, batched=True, remove_columns=columns)

    def evaluate(trainer) -> dict:
        # the Trainer drops example_id / offset_mapping from its own view; eval_ds keeps them, as in run_qa
        start_logits, end_logits = predict_in_order(trainer, eval_ds)[:2]
        started = time.perf_counter()
        best = loop_decode(eval_raw, eval_ds, start_logits, end_logits)
        decode_seconds = time.perf_counter() - started
        return {**squad_em_f1({k: p["text"] for k, p in best.items()}, eval_examples), "decode_seconds": decode_seconds}

    collate = default_data_collator if pad else DataCollatorWithPadding(tokenizer)
    out = train_and_eval(side, model, train_ds, collate, hp, evaluate, len(train_examples), len(eval_examples))
    out.update(metric=out["metrics"]["f1"], exact_match=out["metrics"]["exact_match"])
    return out
