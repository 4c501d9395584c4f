"""A task is a fixed spec plus the state it learns: reading has no side effects, ``fit`` returns what
the training data taught, ``with_learned`` applies it, and a task rebuilt from ``state()`` predicts
as the trained one does. Options given to eval/predict make a new task (``apply_options``)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bertkit.data.registry import Source
from bertkit.errors import BertkitError
from bertkit.tasks import task_from_state
from bertkit.tasks.base import TRAIN, Features, Learned
from bertkit.tasks.classification import SentencePairTask, SingleSentenceTask
from bertkit.tasks.qa import QuestionAnsweringTask
from bertkit.tasks.tagging import TaggingTask
from bertkit.tasks.training_spec import FINE_TUNE

MULTI_LABEL = [
    {"review": f"text {i}", "tags": tags}
    for i, tags in enumerate([["joy"], ["anger", "joy"], [], ["fear"], ["joy", "fear"], ["anger"]])
]
REGRESSION = [
    {"sentence1": f"a {i}", "sentence2": f"b {i}", "score": score} for i, score in enumerate([0.5, 4.0, 2.5, 3.0, 1.0])
]


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return Source(str(path), path=path)


def read_twice(task, source):
    before = json.dumps(task.state(), sort_keys=True)
    first, second = task.read(source, TRAIN), task.read(source, TRAIN)
    assert first == second and json.dumps(task.state(), sort_keys=True) == before  # no side effect
    return first


def same_predictions(trained, examples, outputs, features):
    """The trained task and one rebuilt from its state() decode and write the same rows."""
    rebuilt = task_from_state(json.loads(json.dumps(trained.state())))  # as bertkit.json stores it
    rows = [
        [task.format_prediction(ex, p) for ex, p in zip(examples, task.postprocess(examples, features, outputs))]
        for task in (trained, rebuilt)
    ]
    assert rows[0] == rows[1]
    return rows[0]


def test_multi_label_reading_is_pure_and_fit_returns_kind_layout_labels_and_bias(tmp_path):
    task = SingleSentenceTask(options={"label_column": "tags", "class_weights": "auto"})
    examples = read_twice(task, write_jsonl(tmp_path / "train.jsonl", MULTI_LABEL))
    assert examples.seen["problem_type"] == "multi-label" and task.kind.name == "single-label"
    learned = task.fit(examples)
    assert isinstance(learned, Learned) and learned.labels == ["anger", "fear", "joy"]
    assert learned.options["problem_type"] == "multi-label" and learned.options["text_column"] == "review"
    assert learned.options["class_weight_values"] and learned.notices  # weighed: stored, and said
    assert learned.head_bias == pytest.approx(tuple(np.log([2 / 4, 2 / 4, 3 / 3])), abs=1e-6)  # log-odds
    assert task.labels is None and "problem_type" not in task.options  # fit applied nothing
    trained = task.with_learned(learned)
    assert trained.kind.name == "multi-label" and trained.training_spec().head_bias == learned.head_bias
    assert trained.training_spec().recipe == FINE_TUNE and trained.training_spec().loss.target == "multi_hot"
    logits = np.random.default_rng(0).normal(size=(len(examples), 3))
    rows = same_predictions(trained, examples, {"logits": list(logits)}, [{"truncated": False}] * len(examples))
    assert all(set(row["labels"]) <= {"anger", "fear", "joy"} for row in rows)


def test_regression_scaling_is_learned_and_the_finished_task_stores_it_as_a_record(tmp_path):
    task = SentencePairTask(options={"label_column": "score", "problem_type": "regression", "scale_targets": True})
    examples = read_twice(task, write_jsonl(tmp_path / "train.jsonl", REGRESSION))
    learned = task.fit(examples)
    scaling = learned.options["target_scaling"]
    assert scaling["mean"] == pytest.approx(2.2) and learned.labels is None and "target_scaling" not in task.options
    trained = task.with_learned(learned)
    assert trained.training_spec().target_scaling == (scaling["mean"], scaling["std"])
    logits = np.random.default_rng(1).normal(size=(len(examples), 1))
    same_predictions(trained, examples, {"logits": list(logits)}, [{"truncated": False}] * len(examples))
    finished = trained.finished()  # the saved head holds the scaling: it is not applied again
    assert "target_scaling" not in finished.options and finished.options["scaled_targets"] == scaling
    assert trained.options["target_scaling"] == scaling  # finished() made a new task


def test_tagging_and_qa_learn_their_scheme_and_unanswerable(tmp_path):
    path = tmp_path / "eng.train"
    path.write_text("EU NNP I-NP I-ORG\nrejects VBZ I-VP O\n\nParis NNP I-NP I-LOC\nLondon NNP I-NP B-LOC\n")
    ner = TaggingTask()
    learned = ner.fit(read_twice(ner, Source(str(path), path=path)))
    assert learned.options == {"input_scheme": "IOB1"} and learned.labels == ["O", "B-LOC", "I-LOC", "B-ORG", "I-ORG"]
    squad = {
        "data": [
            {
                "paragraphs": [
                    {
                        "context": "Paris is in France.",
                        "qas": [
                            {
                                "id": "1",
                                "question": "Where is Paris?",
                                "answers": [{"text": "France", "answer_start": 12}],
                            },
                            {"id": "2", "question": "Who?", "answers": [], "is_impossible": True},
                        ],
                    }
                ]
            }
        ]
    }
    (tmp_path / "train.json").write_text(json.dumps(squad))
    qa = QuestionAnsweringTask()
    learned = qa.fit(read_twice(qa, Source(str(tmp_path / "train.json"), path=tmp_path / "train.json")))
    assert learned == Learned(options={"unanswerable": True}) and "unanswerable" not in qa.options


def test_preprocess_returns_its_stats_with_the_features(tiny_bert):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_bert)
    task = SingleSentenceTask(6, labels=["neg", "pos"])
    features = task.preprocess([{"text": "the film was very very good"}, {"text": "good"}], tokenizer, train=False)
    assert isinstance(features, Features) and features.stats["truncated"] == 1
    assert task.preprocess([{"text": "good"}], tokenizer, train=False).stats == {"truncated": 0}


def test_apply_options_makes_a_new_checked_task_and_leaves_the_model_s_own():
    task = SingleSentenceTask(labels=["a", "b", "c"], options={"problem_type": "single-label"})
    given = task.apply_options({"top_k": 2, "label_map": None}, "predict")
    assert given.options["top_k"] == 2 and "top_k" not in task.options
    with pytest.raises(BertkitError, match="--top-k must be >= 1"):
        task.apply_options({"top_k": 0}, "predict")
    with pytest.raises(BertkitError, match="--n-best does not apply to a cls model"):
        task.apply_options({"n_best": 3}, "predict")
    with pytest.raises(BertkitError, match="--n-best must be at least 1"):
        QuestionAnsweringTask().apply_options({"n_best": 0}, "predict")
