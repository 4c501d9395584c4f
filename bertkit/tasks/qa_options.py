"""The options qa declares (bertkit/tasks/qa.py) and what each of its prediction rows holds: the
windows' stride and the query's cut, the answer's longest span, SQuAD v2's null threshold, and
their defaults."""

from __future__ import annotations

from bertkit.tasks.base import TaskOption
from bertkit.tasks.panels import LONG_TEXT_PANEL

DEFAULT_DOC_STRIDE = 128
DEFAULT_MAX_ANSWER_LENGTH = 30
DEFAULT_MAX_QUERY_LENGTH = 64
# Google's max-context rule (a span must start in the window where its first token has the most
# context) is an option, off by default: on the last 10 SQuAD dev articles (1,988 questions, MiniLM)
# it changed F1 by +0.15 (256/64 windows), -0.11 (128/32, 1,749 multi-window questions) and +0.02
# (384/128), i.e. no consistent gain, for ~40% more decoding time.
DEFAULT_MAX_CONTEXT = False
QA_OPTIONS = (
    TaskOption(
        "doc_stride",
        int,
        "Tokens of OVERLAP between consecutive windows of a long context (as in HF, "
        "not the step between windows; default 128).",
        panel=LONG_TEXT_PANEL,
    ),
    TaskOption("max_answer_length", int, "Longest answer in tokens.", default=DEFAULT_MAX_ANSWER_LENGTH),
    TaskOption("n_best", int, "qa: also return the N best distinct answers.", ("predict",)),
    TaskOption("max_query_length", int, "Questions are cut to this many tokens (64, at most half a window).", ()),
    TaskOption("max_context", bool, "Read each token in the window where it has the most context (Google's rule).", ()),
    TaskOption(
        "null_threshold",
        float,
        "SQuAD v2: answer only when the best span beats [CLS] by this margin (tuned and stored by `bertkit eval`).",
        (),
    ),
    TaskOption("unanswerable", bool, "The training data has unanswerable questions (stored).", ()),
    TaskOption(
        "strict",
        bool,
        "An answer_start that does not point at its text, or an answer missing from its "
        "context, is an error instead of being moved or skipped.",
        (),
    ),
)
QA_PREDICTION_FIELDS = {
    "id": "the question's id",
    "answer": "the answer text (empty: no answer)",
    "start": "its first character in the context",
    "end": "one past its last character",
    "score": "softmax(start) x softmax(end) over the context tokens of the answer's window "
    "(independent of --n-best); for an empty answer (SQuAD v2), "
    "sigmoid(null_score_diff - null_threshold), above 0.5",
    "n_best": "with --n-best: the best distinct answers, each with that score",
    "null_score_diff": "SQuAD v2 models: [CLS] score minus the best span's score (higher: more "
    "likely no answer; the answer is empty when it exceeds the model's "
    "null_threshold): the official script's na_prob; null when the context "
    "has no span",
    "best_span_answer": "SQuAD v2 models: the best non-empty answer, even when the answer is "
    "empty: what the official script's --na-prob-file search needs",
}
