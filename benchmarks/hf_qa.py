"""run_qa.py-style extractive QA baseline (SQuAD v1.1) with the HF Trainer, plus a faithful
re-implementation of the example's ``utils_qa.postprocess_qa_predictions`` (``loop_decode``) and the
official SQuAD v1.1 EM/F1 (``squad_em_f1``) -- no ``evaluate.load`` (it needs the Hub).
"""

from __future__ import annotations

import collections
from typing import Any, Sequence

import numpy as np

from benchmarks._hf_common import (
    CountingCollator,
    Timer,
    current_rss_mb,
    make_trainer,
    peak_rss_mb,
    quiet,
    set_threads,
    temp_output_dir,
    throughput_fields,
    training_args,
)


# ------------------------------------------------------------------------------------------ post-processing
def loop_decode(
    examples,
    features,
    start_logits: np.ndarray,
    end_logits: np.ndarray,
    n_best_size: int = 20,
    max_answer_length: int = 30,
) -> "collections.OrderedDict[str, str]":
    """utils_qa.postprocess_qa_predictions (version_2_with_negative=False), re-implemented faithfully:
    for every feature, the top-``n_best_size`` start x top-``n_best_size`` end python double loop, span
    filters, sort of the preliminary predictions, softmax over the n-best, "empty" fallback.

    examples: a datasets.Dataset or a list of dicts with "id" and "context".
    features: a datasets.Dataset or a list of dicts with "example_id" and "offset_mapping" (None outside
      the context), one per row of start_logits/end_logits.  Passing the Arrow Dataset, as run_qa does,
      includes the cost of its per-row access.
    Returns {example id: answer text}.
    """
    assert len(start_logits) == len(features), f"Got {len(start_logits)} predictions and {len(features)} features."
    example_ids = examples["id"] if not isinstance(examples, list) else [e["id"] for e in examples]
    example_id_to_index = {k: i for i, k in enumerate(example_ids)}
    features_per_example = collections.defaultdict(list)
    for i, feature in enumerate(features):
        features_per_example[example_id_to_index[feature["example_id"]]].append(i)

    all_predictions: collections.OrderedDict[str, str] = collections.OrderedDict()
    for example_index, example in enumerate(examples):
        feature_indices = features_per_example[example_index]
        min_null_prediction = None
        prelim_predictions = []
        for feature_index in feature_indices:
            s_logits = start_logits[feature_index]
            e_logits = end_logits[feature_index]
            offset_mapping = features[feature_index]["offset_mapping"]
            token_is_max_context = features[feature_index].get("token_is_max_context", None)

            feature_null_score = s_logits[0] + e_logits[0]
            if min_null_prediction is None or min_null_prediction["score"] > feature_null_score:
                min_null_prediction = {"offsets": (0, 0), "score": feature_null_score,
                                       "start_logit": s_logits[0], "end_logit": e_logits[0]}

            start_indexes = np.argsort(s_logits)[-1 : -n_best_size - 1 : -1].tolist()
            end_indexes = np.argsort(e_logits)[-1 : -n_best_size - 1 : -1].tolist()
            for start_index in start_indexes:
                for end_index in end_indexes:
                    if (
                        start_index >= len(offset_mapping)
                        or end_index >= len(offset_mapping)
                        or offset_mapping[start_index] is None
                        or offset_mapping[end_index] is None
                    ):
                        continue
                    if end_index < start_index or end_index - start_index + 1 > max_answer_length:
                        continue
                    if token_is_max_context is not None and not token_is_max_context.get(str(start_index), False):
                        continue
                    prelim_predictions.append(
                        {
                            "offsets": (offset_mapping[start_index][0], offset_mapping[end_index][1]),
                            "score": s_logits[start_index] + e_logits[end_index],
                            "start_logit": s_logits[start_index],
                            "end_logit": e_logits[end_index],
                        }
                    )

        predictions = sorted(prelim_predictions, key=lambda x: x["score"], reverse=True)[:n_best_size]

        context = example["context"]
        for pred in predictions:
            offsets = pred.pop("offsets")
            pred["text"] = context[offsets[0] : offsets[1]]

        if len(predictions) == 0 or (len(predictions) == 1 and predictions[0]["text"] == ""):
            predictions.insert(0, {"text": "empty", "start_logit": 0.0, "end_logit": 0.0, "score": 0.0})

        scores = np.array([pred.pop("score") for pred in predictions])
        exp_scores = np.exp(scores - np.max(scores))
        probs = exp_scores / exp_scores.sum()
        for prob, pred in zip(probs, predictions):
            pred["probability"] = prob

        all_predictions[example["id"]] = predictions[0]["text"]
    return all_predictions


# ------------------------------------------------------------------------------------------ SQuAD v1.1 metric
def squad_em_f1(predictions: dict[str, str], examples: Sequence[dict]) -> dict[str, float]:
    """SQuAD v1.1 exact match and F1 (percent), max over the ground truths of each question; a question
    with no prediction counts 0. Both sides of the benchmark are scored by this one function, which uses
    bertkit's implementation of the official script (tested against a verbatim copy of it)."""
    from bertkit.metrics.squad import squad_scores

    golds = {ex["id"]: list(ex["answers"]["text"]) for ex in examples}
    scores = squad_scores({k: v for k, v in predictions.items() if k in golds}, golds)
    return {"exact_match": scores["exact_match"], "f1": scores["f1"]}


# ------------------------------------------------------------------------------------------ baseline
def _squad_rows(examples: Sequence[dict]) -> list[dict]:
    return [
        {
            "id": e["id"],
            "question": e["question"],
            "context": e["context"],
            "answers": {"text": list(e["answers"]["text"]),
                        "answer_start": [int(x) for x in e["answers"]["answer_start"]]},
        }
        for e in examples
    ]


def qa_feature_functions(tokenizer, max_seq_length: int = 384, doc_stride: int = 128, pad_to_max_length: bool = True):
    """run_qa.py's ``prepare_train_features`` / ``prepare_validation_features`` for ``Dataset.map(batched=True)``.

    Train features get start/end token positions (CLS index when the window does not fully contain the first
    answer); validation features keep ``example_id`` and an ``offset_mapping`` that is None outside the context.
    """
    pad_on_right = tokenizer.padding_side == "right"
    max_len = min(max_seq_length, tokenizer.model_max_length)
    padding = "max_length" if pad_to_max_length else False
    q_col, c_col = "question", "context"

    def tokenize(examples):
        examples[q_col] = [q.lstrip() for q in examples[q_col]]
        return tokenizer(
            examples[q_col if pad_on_right else c_col],
            examples[c_col if pad_on_right else q_col],
            truncation="only_second" if pad_on_right else "only_first",
            max_length=max_len,
            stride=doc_stride,
            return_overflowing_tokens=True,
            return_offsets_mapping=True,
            padding=padding,
        )

    def prepare_train_features(examples):
        tokenized = tokenize(examples)
        sample_mapping = tokenized.pop("overflow_to_sample_mapping")
        offset_mapping = tokenized.pop("offset_mapping")
        tokenized["start_positions"] = []
        tokenized["end_positions"] = []
        for i, offsets in enumerate(offset_mapping):
            input_ids = tokenized["input_ids"][i]
            if tokenizer.cls_token_id in input_ids:
                cls_index = input_ids.index(tokenizer.cls_token_id)
            elif tokenizer.bos_token_id in input_ids:
                cls_index = input_ids.index(tokenizer.bos_token_id)
            else:
                cls_index = 0
            sequence_ids = tokenized.sequence_ids(i)
            answers = examples["answers"][sample_mapping[i]]
            if len(answers["answer_start"]) == 0:
                tokenized["start_positions"].append(cls_index)
                tokenized["end_positions"].append(cls_index)
                continue
            start_char = answers["answer_start"][0]
            end_char = start_char + len(answers["text"][0])
            token_start_index = 0
            while sequence_ids[token_start_index] != (1 if pad_on_right else 0):
                token_start_index += 1
            token_end_index = len(input_ids) - 1
            while sequence_ids[token_end_index] != (1 if pad_on_right else 0):
                token_end_index -= 1
            if not (offsets[token_start_index][0] <= start_char and offsets[token_end_index][1] >= end_char):
                tokenized["start_positions"].append(cls_index)
                tokenized["end_positions"].append(cls_index)
            else:
                while token_start_index < len(offsets) and offsets[token_start_index][0] <= start_char:
                    token_start_index += 1
                tokenized["start_positions"].append(token_start_index - 1)
                while offsets[token_end_index][1] >= end_char:
                    token_end_index -= 1
                tokenized["end_positions"].append(token_end_index + 1)
        return tokenized

    def prepare_validation_features(examples):
        tokenized = tokenize(examples)
        sample_mapping = tokenized.pop("overflow_to_sample_mapping")
        tokenized["example_id"] = []
        context_index = 1 if pad_on_right else 0
        for i in range(len(tokenized["input_ids"])):
            sequence_ids = tokenized.sequence_ids(i)
            tokenized["example_id"].append(examples["id"][sample_mapping[i]])
            tokenized["offset_mapping"][i] = [
                (o if sequence_ids[k] == context_index else None) for k, o in enumerate(tokenized["offset_mapping"][i])
            ]
        return tokenized

    return prepare_train_features, prepare_validation_features


def hf_qa(
    train_examples: Sequence[dict],
    eval_examples: Sequence[dict],
    model_path: str,
    *,
    epochs: float = 2.0,
    lr: float = 3e-5,
    batch_size: int = 12,
    seed: int = 42,
    best: bool = False,
    bf16: bool = False,
    max_seq_length: int = 384,
    doc_stride: int = 128,
    n_best_size: int = 20,
    max_answer_length: int = 30,
    eval_batch_size: int = 8,
    num_threads: int | None = None,
) -> dict[str, Any]:
    """run_qa.py-style SQuAD v1.1 fine-tuning + evaluation with the HF Trainer.

    examples: {"id", "question", "context", "answers": {"text": [...], "answer_start": [...]}}.
    run_qa defaults: max_seq_length=min(384, model_max_length), doc_stride=128, pad_to_max_length=True
    (padding="max_length" + default_data_collator), truncation="only_second", return_overflowing_tokens,
    return_offsets_mapping, question.lstrip(); a training feature whose window does not fully contain the
    first answer is labelled with the CLS index.  Eval = Trainer.predict on the features, then loop_decode
    (utils_qa post-processing, n_best_size=20, max_answer_length=30), then SQuAD v1.1 EM/F1.
    best=True: padding=False + DataCollatorWithPadding + train_sampling_strategy="group_by_length".
    """
    quiet()
    threads = set_threads(num_threads)
    rss_start = current_rss_mb()
    from datasets import Dataset
    from transformers import (
        AutoConfig,
        AutoModelForQuestionAnswering,
        AutoTokenizer,
        DataCollatorWithPadding,
        default_data_collator,
        set_seed,
    )

    set_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    config = AutoConfig.from_pretrained(model_path)
    model = AutoModelForQuestionAnswering.from_pretrained(model_path, config=config)

    max_len = min(max_seq_length, tokenizer.model_max_length)
    prepare_train_features, prepare_validation_features = qa_feature_functions(
        tokenizer, max_seq_length=max_len, doc_stride=doc_stride, pad_to_max_length=not best)

    with Timer() as t_prep:
        train_raw = Dataset.from_list(_squad_rows(train_examples))
        eval_raw = Dataset.from_list(_squad_rows(eval_examples))
        column_names = train_raw.column_names
        train_ds = train_raw.map(prepare_train_features, batched=True, remove_columns=column_names)
        eval_ds = eval_raw.map(prepare_validation_features, batched=True, remove_columns=column_names)

    n_cls_labelled = int(sum(1 for s in train_ds["start_positions"] if s == 0))
    collator = CountingCollator(DataCollatorWithPadding(tokenizer) if best else default_data_collator)
    out: dict[str, Any] = {
        "task": "squad_v1.1",
        "recipe": "hf_trainer" + ("_best" if best else "_default"),
        "best": bool(best),
        "n_train": len(train_examples),
        "n_eval": len(eval_examples),
        "n_train_features": len(train_ds),
        "n_train_features_cls_labelled": n_cls_labelled,
        "n_eval_features": len(eval_ds),
        "epochs": epochs,
        "lr": lr,
        "batch_size": batch_size,
        "seed": seed,
        "num_threads": threads,
        "max_seq_length": max_len,
        "doc_stride": doc_stride,
    }
    with temp_output_dir() as tmp:
        args = training_args(tmp, epochs=epochs, lr=lr, batch_size=batch_size, seed=seed,
                             eval_batch_size=eval_batch_size, best=best, bf16=bf16)
        trainer = make_trainer(model=model, args=args, train_dataset=train_ds, processing_class=tokenizer,
                          data_collator=collator)
        collator.phase = "train"
        with Timer() as t_train:
            train_result = trainer.train()
        collator.phase = "eval"
        # Trainer drops example_id / offset_mapping (not model inputs) from its own view of eval_ds;
        # eval_ds itself keeps them for post-processing, exactly as QuestionAnsweringTrainer does.
        with Timer() as t_pred:
            pred = trainer.predict(eval_ds)
        collator.phase = None
        start_logits, end_logits = pred.predictions[:2]
        with Timer() as t_post:
            predictions = loop_decode(eval_raw, eval_ds, start_logits, end_logits,
                                      n_best_size=n_best_size, max_answer_length=max_answer_length)
        with Timer() as t_metric:
            metric = squad_em_f1(predictions, eval_examples)

    out.update(
        {
            "prep_seconds": t_prep.seconds,
            "train_seconds": t_train.seconds,
            "train_features_per_s": len(train_ds) * epochs / t_train.seconds,
            "train_examples_per_s": len(train_examples) * epochs / t_train.seconds,
            "train_steps": train_result.global_step,
            "train_loss": float(train_result.training_loss),
            **throughput_fields("train", collator.get("train"), t_train.seconds, config),
            "eval_exact_match": metric["exact_match"],
            "eval_f1": metric["f1"],
            "eval_predict_seconds": t_pred.seconds,
            "eval_postprocess_seconds": t_post.seconds,
            "eval_metric_seconds": t_metric.seconds,
            "eval_seconds": t_pred.seconds + t_post.seconds + t_metric.seconds,
            "eval_examples_per_s": len(eval_examples) / (t_pred.seconds + t_post.seconds + t_metric.seconds),
            "eval_features_per_s": len(eval_ds) / t_pred.seconds,
            **throughput_fields("eval", collator.get("eval"), t_pred.seconds),
            "peak_rss_mb": peak_rss_mb(),
            "rss_at_start_mb": rss_start,
            "rss_note": "peak_rss_mb is ru_maxrss of the whole process (max so far), not of this run alone",
        }
    )
    return out
