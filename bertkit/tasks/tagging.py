"""Token tagging (NER): one BIO tag per word, from the word's first sub-word.

Input: CoNLL column files (token first, tag last, any columns between, spaces or TABs) or
JSON/JSONL/Parquet records with ``tokens`` and ``tags`` (the Hub's ``ner_tags`` ids work too). IOB1 data
is converted to IOB2 on load; the scheme found in training is stored as option ``input_scheme``.
Any entity types work (``B-person``); the tag set is read from the training data.

Sentences longer than ``max_length`` sub-words are split into overlapping windows over words
(``doc_stride`` = words shared by consecutive windows, default half a window); every word is
labelled and predicted once, in the window where it has the most context (no averaging), so
nothing is truncated. ``stats`` counts the sentences that needed windows.

With option ``context`` = ``document`` (FLERT), each sentence is encoded between the word pieces of
its neighbours in its document (bertkit/tasks/document_context.py: where documents come from, and
how the room is shared); labels and predictions stay on the sentence's own words.

Prediction input: lines of raw text (``.txt``, split into CoNLL-style words with character
offsets), a ``text`` field in JSONL/JSON/CSV, pre-tokenised ``tokens`` in JSONL/JSON, or a
CoNLL file. Each row gets ``words``, ``tags`` (valid IOB2; IOB1 for a sentence whose input tags
are IOB1, so that conlleval on a gold file and its predictions matches ``eval``'s token
accuracy) and ``entities``.
"""

from __future__ import annotations

import numpy as np

from bertkit.data import formats, readers
from bertkit.data.conll import read_conll, read_tagged_records
from bertkit.data.registry import Source, read_hub
from bertkit.decoding.tags import (
    detect_scheme,
    entity_spans,
    input_scheme,
    iob1_to_iob2,
    tags_as_written,
    validate_bio,
)
from bertkit.errors import BertkitError
from bertkit.metrics.tagging import tagging_scores
from bertkit.tasks import card_texts
from bertkit.tasks.annotated import (
    DATA_FORMAT,
    LABEL_CONTROL,
    PREDICTION_FORMAT,
    READING_OPTIONS,
    SPAN_ALIGNMENT,
    SPAN_OFFSETS,
    SPANS,
    annotated_records,
    reading_options_dropped,
    with_notices,
)
from bertkit.tasks.base import PREDICT, TOKEN_CLASS, Examples, Learned, Task, TaskOption, seen_in
from bertkit.tasks.document_context import (
    CONTEXT_OPTIONS,
    check_context_options,
    context_pieces,
    context_size,
    document_ids,
    in_context,
    uses_documents,
    with_context,
)
from bertkit.tasks.loss_options import LOSS_OPTIONS, check_loss_options, loss_notices, loss_spec, weigh_classes
from bertkit.tasks.panels import LONG_TEXT_PANEL
from bertkit.tasks.tagging_input import (
    CLASSIFICATION_FIELDS,
    FORMAT_HINT,
    QA_FIELDS,
    TEXT_CANDIDATES,
    looks_like_conll,
    raw_examples,
    reject_classification_header,
)
from bertkit.tasks.training_spec import TrainingSpec
from bertkit.tasks.word_windows import encode_words, window_features


class TaggingTask(Task):
    name = "ner"
    model_class = "AutoModelForTokenClassification"
    names_outputs = True
    main_metric = "f1"
    per_token_outputs = True
    summary = "a BIO tag per word"
    card_text = card_texts.NER
    targets = {"labels": TOKEN_CLASS}
    fold_group_field = "document"  # a CoNLL file's -DOCSTART- sections
    # whole CoNLL-2003, 3 seeds: random 0.8325 +- 0.0030 entity F1 against length-grouped 0.8194 +- 0.0074,
    # ahead on every seed, at 0.88-0.95x the speed (packing_random_vs_grouped_conll_full, ner_full_random_default)
    default_random_batches = True
    reading_options = READING_OPTIONS
    options_declared = (
        TaskOption(
            "doc_stride",
            int,
            "Words shared by consecutive windows of a long sentence (default: half a window).",
            panel=LONG_TEXT_PANEL,
        ),
        TaskOption(
            "strict",
            bool,
            "ner: score in seqeval's strict IOB2 mode (default: conlleval's, which repairs an "
            "I-X that does not continue an X entity).",
            ("eval",),
        ),
        TaskOption("input_scheme", str, "IOB1 or IOB2, as found in the training data (stored, not a flag).", ()),
        DATA_FORMAT,
        SPAN_ALIGNMENT,
        SPAN_OFFSETS,
        LABEL_CONTROL,
        PREDICTION_FORMAT,
        *LOSS_OPTIONS,
        *CONTEXT_OPTIONS,
    )
    prediction_fields = {
        "text": "the raw input sentence (absent for pre-tokenised input)",
        "words": "the input's words",
        "tags": "one tag per word: valid IOB2, or IOB1 when the input sentence's own tags are IOB1",
        "entities": "type, text and character offsets of each entity",
    }

    def __init__(self, max_length: int | None = None, options: dict | None = None, labels: list | None = None):
        super().__init__(max_length, options, labels)
        check_context_options(self.options, self.max_length)
        stride = self.options.get("doc_stride")
        if stride is not None and (not isinstance(stride, int) or stride < 0):
            raise BertkitError(
                f"--doc-stride {stride} is invalid for ner",
                "give the number of words (>= 0) that consecutive windows of a long sentence share",
            )

    # --- reading -------------------------------------------------------------------------
    def read(self, source: Source, purpose: str) -> list[dict]:
        if source.path is None:
            return read_hub(source, self.from_records, purpose)
        path, where = source.path, source.description
        fmt = formats.of(path)
        if fmt is not None and fmt.typed:  # JSON, JSON Lines, Parquet: records with token and tag lists
            return self.from_records(fmt.read(path, source=where), source, purpose)
        text = readers.read_text(path)
        suffix = path.suffix.lower()
        if fmt is None and text.lstrip()[:1] in ("[", "{"):  # no suffix: JSON by its look
            return self.from_records(formats.parse_records(text, "", where), source, purpose)
        if purpose == PREDICT:
            if looks_like_conll(text):
                return self._in_documents(read_conll(path, require_tags=False), where)
            if fmt in (formats.CSV, formats.TSV):
                return self.from_records(formats.parse_records(text, suffix, where), source, purpose)
            lines = raw_examples([line.rstrip("\r") for line in text.split("\n")], where, "line", trailing=True)
            return in_context(lines, [None] * len(lines), self.options, where, True, "")
        reject_classification_header(text, suffix, where)
        examples = read_conll(path)
        spaced = sum(" " in value for ex in examples for value in ex["tokens"] + ex["tags"])
        if spaced * 2 > sum(len(ex["tokens"]) for ex in examples):
            raise BertkitError(
                f"{where}: most 'tokens' contain spaces, so this looks like sentences with labels "
                "(classification data), not one word per line",
                FORMAT_HINT,
            )
        return self._in_documents(self._gold(examples, where), where)

    @property
    def whole_input(self) -> bool:
        return uses_documents(self.options)

    def _in_documents(self, examples: list, where: str) -> list:
        """A CoNLL file's sentences in their -DOCSTART- documents (those before the first marker are
        one of their own), for --context document."""
        marked = any("document" in ex for ex in examples)
        ids = [ex.get("document", -1) for ex in examples] if marked else [None] * len(examples)
        return in_context(examples, ids, self.options, where, False, "no -DOCSTART- line")

    def reads_whole(self, path) -> bool:
        if super().reads_whole(path):
            return True
        if formats.lookup(path.suffix) is not formats.TEXT_LINES:  # only a .txt may be a CoNLL file
            return False
        with open(path, encoding="utf-8", errors="replace") as handle:
            head = handle.read(1 << 16)
        if len(head) == 1 << 16:
            head = head.rsplit("\n", 1)[0]  # whole lines only
        return looks_like_conll(head)  # a CoNLL column file is one sentence per block: read whole

    def from_records(self, records, source, purpose, hub=False):
        where = source.description
        records, said = annotated_records(records, self.options, SPANS, purpose, where)  # an annotation tool's export
        examples = self._from_plain(records, source, purpose)
        raw = purpose == PREDICT and all("text" in ex for ex in examples)  # sentences to tag: in their order
        ids = document_ids(records, where) if self.whole_input else []  # a sentence model reads no ids
        examples = in_context(examples, ids, self.options, where, raw, "no 'document' field")
        return with_notices(examples, said)

    def _from_plain(self, records, source, purpose):
        where = source.description
        fields = set(records[0]) if records else set()
        if "tokens" in fields:
            names = source.spec.labels_of("tags" if "tags" in fields else "ner_tags") if source.spec else None
            label_names = list(names) if names else None
            examples = read_tagged_records(records, where, label_names, require_tags=purpose != PREDICT)
            return examples if purpose == PREDICT else self._gold(examples, where)
        if fields & QA_FIELDS:
            raise BertkitError(
                f"{where}: this looks like question-answering (SQuAD) data "
                f"(fields: {', '.join(sorted(fields))}), not token tagging",
                FORMAT_HINT,
            )
        if purpose != PREDICT:
            kind = "classification data, " if fields & CLASSIFICATION_FIELDS else ""
            raise BertkitError(
                f"{where}: records have no 'tokens' field ({kind}fields: {', '.join(sorted(fields))})", FORMAT_HINT
            )
        if all(set(r) <= {"text", "text_pair"} for r in records):  # stdin lines: the line reader splits at a TAB
            texts = [
                "\t".join(readers.text_value(r, k, row, where) for k in ("text", "text_pair") if r.get(k) is not None)
                for row, r in enumerate(records, 1)
            ]
        else:
            column = next((c for c in TEXT_CANDIDATES if c in fields), None)
            if column is None:
                raise BertkitError(
                    f"{where}: no 'text' or 'tokens' field (fields: {', '.join(sorted(fields))})",
                    "give raw sentences under 'text', or words under 'tokens'",
                )
            texts = [readers.text_value(r, column, row, where) for row, r in enumerate(records, 1)]
        return raw_examples(texts, where, "row")

    def _gold(self, examples: list[dict], where: str) -> Examples:
        tag_lists = [ex["tags"] for ex in examples]
        validate_bio(tag_lists, where)
        scheme = detect_scheme(tag_lists)
        if scheme == "IOB1":
            for example in examples:
                # the file's own tags stay: token accuracy compares with them, as conlleval would
                example["file_tags"] = example["tags"]
                example["tags"] = iob1_to_iob2(example["tags"])
        return Examples(examples, {"input_scheme": scheme})  # stored by fit (training data's)

    def fit(self, examples, seen=None):
        """The tag set, the training data's tag scheme and the class weights (counted per word: each
        word's label sits on its first sub-word, once)."""
        seen = seen_in(examples) if seen is None else seen
        check_loss_options(self.options, has_classes=True)
        types = sorted(_types(examples))
        if not types:
            raise BertkitError(
                "the training data has no entities (every tag is O)",
                "tag entities with B-TYPE / I-TYPE, e.g. B-PER I-PER",
            )
        # B- and I- of every type seen, even if a type only ever has one-word entities in training
        labels = ["O"] + [f"{prefix}-{t}" for t in types for prefix in ("B", "I")]
        options = {**self.options, **({"input_scheme": seen["input_scheme"]} if seen.get("input_scheme") else {})}
        if uses_documents(options):  # stored, so eval and predict use the context training used
            options["context_tokens"] = context_size(options)
        index = {label: i for i, label in enumerate(labels)}
        ids = np.asarray([index[tag] for ex in examples for tag in ex["tags"]], dtype=np.int64)
        weighed = weigh_classes(options, np.bincount(ids, minlength=len(labels)), labels, False, len(ids))
        changes = {key: value for key, value in options.items() if self.options.get(key) != value}
        removed = {key: None for key in self.options if key not in options}
        notices = (*loss_notices(options), *([weighed] if weighed else []))
        return Learned(labels, {**changes, **removed}, notices=notices)

    def check_eval_examples(self, examples, source):
        known = {label[2:] for label in self.labels if label != "O"}
        unseen = sorted(_types(examples) - known)
        if unseen:
            raise BertkitError(
                f"{source.description}: entity type(s) never seen in training: {', '.join(unseen)}",
                f"the model knows {', '.join(sorted(known))}; map or drop the others",
            )

    # --- features --------------------------------------------------------------------------
    def preprocess(self, examples, tokenizer, train):
        encodings, vanished = encode_words(tokenizer, [ex["tokens"] for ex in examples])
        label_ids = {label: i for i, label in enumerate(self.labels or [])}
        features, windowed, cut, placed = [], 0, 0, 0
        documents = uses_documents(self.options)
        pieces = context_pieces(tokenizer, examples, context_size(self.options)) if documents else []
        for index, (example, encoding) in enumerate(zip(examples, encodings)):
            windows = window_features(encoding, self.max_length, self.options.get("doc_stride"))
            windowed += len(windows) > 1
            if documents and pieces[index] and len(windows) == 1:  # a windowed sentence is its own context
                placed += with_context(windows[0], encoding, pieces[index], self.max_length)
            budget = self.max_length - len(encoding.prefix) - len(encoding.suffix)
            cut += sum(len(tokens) > budget for tokens in encoding.word_tokens)
            for window in windows:
                window["example_index"] = index
                tags = example.get("tags")
                if train or (tags is not None and all(tag in label_ids for tag in tags)):  # evaluation: for its loss
                    labels = [-100] * len(window["input_ids"])
                    for word, position in zip(window["words"], window["first_tokens"]):
                        labels[position] = label_ids[tags[word]]
                    window["labels"] = labels
                features.append(window)
        stats = {
            "sentences": len(examples),
            "windowed_sentences": windowed,
            "features": len(features),
            "words_without_subwords": vanished,
            "words_cut": cut,
            **({"sentences_with_context": placed} if documents else {}),
        }
        if windowed:
            stats["notices"] = [
                f"{windowed} of {len(examples)} sentence(s) longer than --max-length were "
                "split into overlapping windows"
            ]
        if seen_in(examples).get("input_scheme"):  # gold data as read: the scheme its file used
            stats["input_scheme"] = seen_in(examples)["input_scheme"]
        said = list(seen_in(examples).get("notices", [])) + (list(self.learned.notices) if train else [])
        if said:
            stats["notices"] = stats.get("notices", []) + said
        return self.reported(features, stats)

    def training_spec(self):
        return TrainingSpec(loss=loss_spec(self.options))

    def finished(self):
        dropped = reading_options_dropped(self.options)  # how the file was read is not the model's
        return self.with_options(dropped) if dropped else self

    def postprocess(self, examples, features, outputs):
        predicted: list[list] = [[None] * len(ex["tokens"]) for ex in examples]
        for feature, logits in zip(features, outputs["logits"]):
            best = np.asarray(logits)[feature["first_tokens"]].argmax(-1) if feature["words"] else []
            for word, label_id in zip(feature["words"], best):
                predicted[feature["example_index"]][word] = self.labels[int(label_id)]
        return [[tag or "O" for tag in tags] for tags in predicted]  # "O" for a word with no position

    def metrics(self, examples, predictions):
        return tagging_scores([_file_tags(ex) for ex in examples], predictions, strict=bool(self.options.get("strict")))

    def baseline(self, examples, features=None):
        from bertkit.metrics.baselines import always_outside

        return always_outside([_file_tags(ex) for ex in examples]) if examples else None

    def breakdown(self, examples, predictions, metrics):
        return {"kind": "per_type", "per_type": metrics.get("per_type", {})}

    metric_inputs_description = "lists of BIO tags"

    def metric_inputs(self, examples, predictions):
        return [list(p) for p in predictions], [list(ex["tags"]) for ex in examples]

    def gold(self, example):
        return {"gold_tags": list(_file_tags(example))}  # as the file wrote them, like the predicted tags

    def format_prediction(self, example, prediction):
        # Valid IOB2, or IOB1 when the input sentence is tagged in IOB1 (a gold file given to
        # predict): conlleval on that file and these tags then gives eval's token accuracy.
        tags = tags_as_written(prediction, input_scheme(_file_tags(example)))
        row = {"text": example["text"]} if "text" in example else {}
        row.update(words=example["tokens"], tags=tags)
        if "offsets" in example:
            row["entities"] = entity_spans(example["tokens"], tags, example["offsets"], example["text"])
        else:
            row["entities"] = entity_spans(example["tokens"], tags)
        return row


def _file_tags(example: dict) -> list | None:
    """An example's tags as its file wrote them (IOB1 gold is converted to IOB2 on reading)."""
    return example.get("file_tags", example.get("tags"))


def _types(examples: list[dict]) -> set:
    return {tag[2:] for ex in examples for tag in ex["tags"] if tag != "O"}
