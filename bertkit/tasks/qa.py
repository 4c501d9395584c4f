"""Extractive question answering (SQuAD v1.1 / v2.0): answer spans from start/end token logits.

Features are ``[CLS] question [SEP] context window [SEP]``: only the context is truncated, and a
long context becomes several windows that overlap by ``doc_stride`` tokens (HF's ``stride``).
Questions longer than ``max_query_length`` tokens (64, as BERT's run_squad; at most half the
window) are cut to that length. The doc stride defaults to 128 (a third of the window when
--max-length is below 384). Each feature keeps its example index and per-token character
offsets (``None`` outside the context) for decoding, which searches every legal span exactly
over all windows of a question (bertkit.decoding.spans).
"""

from __future__ import annotations

import math
from collections import defaultdict

from bertkit.data.registry import is_any_dataset, load_hub_records, read_hub
from bertkit.data.squad import bad_start_error, read_squad_records, to_examples
from bertkit.decoding.spans import decode_best_batched, decode_question
from bertkit.errors import BertkitError
from bertkit.metrics.breakdowns import qa_buckets
from bertkit.metrics.squad import best_null_threshold, squad_scores, squad_v2_scores
from bertkit.tasks import card_texts
from bertkit.tasks.base import CLASS, PREDICT, SPAN, Learned, Task
from bertkit.tasks.qa_offsets import answer_tokens, stripped_answer, without_spaces
from bertkit.tasks.qa_options import (
    DEFAULT_DOC_STRIDE,
    DEFAULT_MAX_ANSWER_LENGTH,
    DEFAULT_MAX_CONTEXT,
    DEFAULT_MAX_QUERY_LENGTH,
    QA_OPTIONS,
    QA_PREDICTION_FIELDS,
)


class QuestionAnsweringTask(Task):
    name = "qa"
    model_class = "AutoModelForQuestionAnswering"
    main_metric = "f1"
    metric_scale = 100.0  # SQuAD's own scale: a multi-head model's mean reads f1 / 100
    output_names = ("start_logits", "end_logits")
    per_token_outputs = True
    default_max_length = 384
    summary = "answer spans"
    card_text = card_texts.QA
    targets = {"start_positions": CLASS, "end_positions": CLASS}
    gold_fields, fold_group_field = ("answers",), "context"  # a context's questions stay in one fold
    loss_target = SPAN  # transformers' loss without the padding (networks/losses.span_loss): rows can train packed
    options_declared = QA_OPTIONS
    prediction_fields = QA_PREDICTION_FIELDS

    def __init__(self, max_length: int | None = None, options: dict | None = None, labels: list | None = None):
        super().__init__(max_length, options, labels)
        self.check_options()
        self._decoded = None  # (outputs, settings, decodings): tune() and postprocess() share one decode

    # --- settings ---------------------------------------------------------------------------
    @property
    def doc_stride(self) -> int:
        # 128 as in BERT; for short windows (--max-length < 384) a third of the window by default.
        return int(self.options.get("doc_stride", min(DEFAULT_DOC_STRIDE, self.max_length // 3)))

    @property
    def max_query_length(self) -> int:
        return int(self.options.get("max_query_length", min(DEFAULT_MAX_QUERY_LENGTH, self.max_length // 2)))

    def state(self) -> dict:  # "strict" is about one run's input, not a property of the model
        state = super().state()
        return {**state, "options": {k: v for k, v in state["options"].items() if k != "strict"}}

    def check_options(self) -> None:
        for key, lowest in (("doc_stride", 0), ("max_answer_length", 1), ("max_query_length", 1), ("n_best", 1)):
            if key in self.options and int(self.options[key]) < lowest:
                raise BertkitError(
                    f"--{key.replace('_', '-')} must be at least {lowest}, got {self.options[key]}",
                    f"use a value of {lowest} or more",
                )

    # --- reading -------------------------------------------------------------------------------
    def read(self, source, purpose):
        if source.path is not None:
            return self.from_records(read_squad_records(source.path), source, purpose)
        if is_any_dataset(source):  # a Hub id or a dataset directory: its own errors say it all
            return read_hub(source, self.from_records, purpose)
        try:
            records = load_hub_records(source)
        except BertkitError as exc:
            spec = source.spec
            raise BertkitError(
                f"{spec.name} {source.split} needs {spec.files.get(source.split)} in <data dir>/"
                f"{spec.name}/ (--data-dir or BERTKIT_DATA_DIR), and {exc.message}",
                "pass a file instead, e.g. split a local dev file by article with "
                "examples/split_squad_by_article.py and use --data/--eval-data FILE",
            ) from exc
        return self.from_records(records, source, purpose, hub=True)

    def from_records(self, records, source, purpose, hub=False):
        examples = to_examples(records, source.description, need_answers=purpose != PREDICT)
        if purpose != PREDICT and self.options.get("strict"):
            error = bad_start_error(examples, source.description)
            if error:
                raise error
        return examples

    def fit(self, examples, seen=None):
        """Whether the model may answer "no answer": the training data has unanswerable questions."""
        usable = [ex for ex in examples if not ex.get("bad_start")]
        if not usable:
            raise BertkitError(
                "no training question has an answer_start that points at its answer text",
                "check the answer offsets (character positions in the context)",
            )
        return Learned(options={"unanswerable": any(not ex["answers"] for ex in usable)})

    # --- features ------------------------------------------------------------------------------
    def preprocess(self, examples, tokenizer, train):
        keep = [i for i, ex in enumerate(examples) if not (train and ex.get("bad_start"))]
        questions, cut = self._questions([examples[i]["question"] for i in keep], tokenizer)
        encoded = tokenizer(
            questions,
            [examples[i]["context"] for i in keep],
            truncation="only_second",
            max_length=self.max_length,
            stride=self.doc_stride,
            return_overflowing_tokens=True,
            return_offsets_mapping=True,
        )
        features, outside = [], 0
        for f in range(len(encoded["input_ids"])):
            feature = self._window(encoded, f, examples, keep[encoded["overflow_to_sample_mapping"][f]], train)
            outside += (
                train
                and bool(examples[feature["example_index"]].get("answers"))
                and feature.get("start_positions") == 0
            )
            features.append(feature)
        return self.reported(features, self._stats(examples, keep, features, cut, outside, train))

    def _window(self, encoded, f: int, examples: list[dict], index: int, train: bool) -> dict:
        """Window ``f`` of example ``index``: its ids, context offsets and, where known, answer tokens."""
        context = examples[index]["context"]
        offsets = [
            without_spaces(o, context) if s == 1 else None
            for o, s in zip(encoded["offset_mapping"][f], encoded.sequence_ids(f))
        ]
        context_tokens = [t for t, o in enumerate(offsets) if o is not None]
        context_range = (context_tokens[0], context_tokens[-1] + 1) if context_tokens else (0, 0)
        feature = {
            "input_ids": encoded["input_ids"][f],
            "example_index": index,
            "offsets": offsets,
            "context_range": context_range,
        }
        if "token_type_ids" in encoded:
            feature["token_type_ids"] = encoded["token_type_ids"][f]
        answers = examples[index].get("answers")
        if train or (answers is not None and all(a.get("start") is not None for a in answers[:1])):  # eval: loss
            start, end = answer_tokens(offsets, answers[0]) if answers else (0, 0)
            feature["start_positions"], feature["end_positions"] = start, end
        return feature

    def _stats(self, examples, keep, features, cut: int, outside: int, train: bool) -> dict:
        """What preprocessing did, with a notice for each thing the user should know."""
        windows = defaultdict(int)
        for feature in features:
            windows[feature["example_index"]] += 1
        windowed = sum(n > 1 for n in windows.values())
        repaired = sum(bool(ex.get("repaired_start")) for ex in examples)
        stats = {
            "questions": len(keep),
            "features": len(features),
            "windowed_examples": windowed,
            "questions_truncated": cut,
            "bad_answer_start": sum(bool(ex.get("bad_start")) for ex in examples),
            "repaired_answer_start": repaired,
        }
        notices = []
        if windowed:
            notices.append(
                f"{windowed} of {len(keep)} question(s) with a context longer than --max-length were "
                "split into overlapping windows"
            )
        if cut:
            notices.append(
                f"{cut} of {len(keep)} question(s) longer than {self.max_query_length} tokens were cut to that length"
            )
        if train:
            skipped = len(examples) - len(keep)
            stats.update(skipped_bad_answer_start=skipped, windows_without_answer=outside)
            if repaired:  # evaluation scores answer texts, so offsets only matter for training targets
                notices.append(
                    f"{repaired} of {len(examples)} question(s) had an answer_start that does not point "
                    "at the answer text: moved to the nearest occurrence of that text in the context"
                )
            if skipped:
                notices.append(
                    f"{skipped} of {len(examples)} question(s) skipped: an answer text that does not "
                    "occur in the context (bad answer_start, nothing to repair it with)"
                )
        if notices:
            stats["notices"] = notices
        return stats

    def _questions(self, questions: list[str], tokenizer) -> tuple[list[str], int]:
        """Questions cut to max_query_length tokens; fails when the doc stride leaves no room."""
        limit, cut = self.max_query_length, 0
        questions = [q.lstrip() for q in questions]  # some SQuAD v2 questions start with many spaces
        encoded = tokenizer(questions, add_special_tokens=False, return_offsets_mapping=True)
        longest = 0
        for i, offsets in enumerate(encoded["offset_mapping"]):
            if len(offsets) > limit:
                questions[i], cut = questions[i][: offsets[limit - 1][1]], cut + 1
            longest = max(longest, min(len(offsets), limit))
        room = self.max_length - longest - tokenizer.num_special_tokens_to_add(pair=True)
        if self.doc_stride >= room:
            raise BertkitError(
                f"--doc-stride {self.doc_stride} is too large: with --max-length {self.max_length} and questions of "
                f"up to {longest} tokens a window holds {max(room, 0)} context tokens, and the overlap between "
                f"windows must be smaller than that",
                f"use --doc-stride below {max(room, 1)} (e.g. {max(room // 3, 1)}) or a larger --max-length",
            )
        return questions, cut

    # --- decoding ------------------------------------------------------------------------------
    def _decode(self, examples, features, outputs) -> list:
        n_best = int(self.options.get("n_best") or 1)
        max_answer = int(self.options.get("max_answer_length", DEFAULT_MAX_ANSWER_LENGTH))
        use_max_context = bool(self.options.get("max_context", DEFAULT_MAX_CONTEXT))
        key = (n_best, max_answer, use_max_context)
        if self._decoded is not None and self._decoded[0] is outputs and self._decoded[1] == key:
            return self._decoded[2]
        windows = [
            {
                "start_logits": start,
                "end_logits": end,
                "offsets": feature["offsets"],
                "context_range": feature.get("context_range"),
            }
            for feature, start, end in zip(features, outputs["start_logits"], outputs["end_logits"])
        ]
        if n_best == 1 and not use_max_context:  # the common case: one exact search over all windows at once
            decoded = decode_best_batched(
                [ex["context"] for ex in examples], windows, [f["example_index"] for f in features], max_answer
            )
        else:
            per_example = defaultdict(list)
            for feature, window in zip(features, windows):
                per_example[feature["example_index"]].append(window)
            decoded = [
                decode_question(ex["context"], per_example[i], max_answer, n_best, use_max_context)
                for i, ex in enumerate(examples)
            ]
        self._decoded = (outputs, key, decoded)
        return decoded

    def _can_abstain(self) -> bool:
        return "null_threshold" in self.options or bool(self.options.get("unanswerable"))

    def _is_v2(self, examples) -> bool:
        return self._can_abstain() or any(not ex["answers"] for ex in examples)

    def tune(self, examples, features, outputs):
        """SQuAD v2: the null-score threshold that maximises F1 on this evaluation data. Returned,
        not applied: the caller decides whether to store it (bertkit.api.evaluate)."""
        if not self._is_v2(examples):
            return {}
        predictions = self.postprocess(examples, features, outputs)
        threshold, _ = best_null_threshold(*_null_margins_and_texts(predictions), _golds(examples))
        return {"null_threshold": float(threshold) if math.isfinite(threshold) else 0.0}

    def postprocess(self, examples, features, outputs):
        """Per question: answer text, char start/end (end exclusive), score and the n-best list,
        plus what the v2 threshold search needs (the null margin and the best non-null text)."""
        can_abstain = self._can_abstain()
        threshold = float(self.options.get("null_threshold", 0.0))
        k = int(self.options.get("n_best", 1))
        predictions = []
        for decoding in self._decode(examples, features, outputs):
            n_best = [
                {**stripped_answer(a.text, a.start), "score": round(a.probability, 6)} for a in decoding.n_best[:k]
            ]
            margin = decoding.null_score - decoding.best_span_score if decoding.best is not None else math.inf
            if decoding.best is None or (can_abstain and margin > threshold):
                null_probability = 1.0 / (1.0 + math.exp(-min(margin - threshold, 700.0)))  # > 0.5 here
                best = {"answer": "", "start": None, "end": None, "score": round(null_probability, 6)}
            else:
                best = dict(n_best[0])
            predictions.append(
                {
                    **best,
                    "n_best": n_best,
                    "null_margin": margin,
                    "best_text": n_best[0]["answer"] if decoding.best is not None else "",
                }
            )
        return predictions

    def metrics(self, examples, predictions):
        """SQuAD v1.1 (exact_match, f1), or for a model that can say "no answer" or data with
        unanswerable questions the official v2 report: exact/f1 at the threshold the model
        predicted with, HasAns/NoAns, and best_exact/best_f1 with their thresholds."""
        golds = _golds(examples)
        answers = {str(i): p["answer"] for i, p in enumerate(predictions)}
        if not self._is_v2(examples):
            return squad_scores(answers, golds)
        return squad_v2_scores(answers, golds, *_null_margins_and_texts(predictions))

    def baseline(self, examples, features=None):
        from bertkit.metrics.baselines import trivial_spans

        return trivial_spans(examples, self._is_v2(examples)) if examples else None

    def breakdown(self, examples, predictions, metrics):
        return qa_buckets(examples, [p["answer"] for p in predictions], version_2=self._is_v2(examples))

    metric_inputs_description = "SQuAD dicts (id + prediction_text / id + answers)"

    def metric_inputs(self, examples, predictions):
        return (
            [{"id": str(ex["id"]), "prediction_text": p["answer"]} for ex, p in zip(examples, predictions)],
            [
                {
                    "id": str(ex["id"]),
                    "answers": {
                        "text": [a["text"] for a in ex["answers"]],
                        "answer_start": [a["start"] for a in ex["answers"]],
                    },
                }
                for ex in examples
            ],
        )

    def format_prediction(self, example, prediction):
        row = {"id": example["id"], **{k: prediction[k] for k in ("answer", "start", "end", "score")}}
        if self.options.get("n_best"):
            row["n_best"] = prediction["n_best"]
        if self._can_abstain():
            # What evaluate-v2.0.py needs to reproduce eval's best_exact/best_f1: the best non-empty
            # texts as predictions and the margins as --na-prob-file (README, "SQuAD v2 scores").
            margin = prediction["null_margin"]
            row["null_score_diff"] = margin if math.isfinite(margin) else None  # JSON has no Infinity
            row["best_span_answer"] = prediction["best_text"]
        return row


def _null_margins_and_texts(predictions: list[dict]) -> tuple[dict, dict]:
    return (
        {str(i): p["null_margin"] for i, p in enumerate(predictions)},
        {str(i): p["best_text"] for i, p in enumerate(predictions)},
    )


def _golds(examples: list[dict]) -> dict:
    return {str(i): [a["text"] for a in ex["answers"]] for i, ex in enumerate(examples)}
