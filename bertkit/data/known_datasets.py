"""The known dataset names (`bertkit datasets`): each one's task, Hub id, local file layout, columns
and label names, as a DatasetSpec (bertkit/data/registry.py resolves them)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    task: str
    files: dict  # split -> file name inside <data dir>/<name>/
    hub_id: str
    hub_config: str | None
    hub_splits: dict  # split -> Hub split name
    columns: dict = field(default_factory=dict)  # canonical field -> local column
    hub_columns: dict = field(default_factory=dict)  # canonical field -> Hub column
    label_names: tuple | None = None
    headerless: tuple | None = None  # column names for files shipped without a header row
    dev_split: str = "dev"
    unlabelled: tuple = ()  # splits published without labels (GLUE test sets)
    problem_type: str | None = None  # the label kind when not single-label: "regression", "multi-label"
    label_separator: str | None = None  # multi-label ids joined in one field ("3,15")
    suffix: str | None = None  # how the local files are read when their suffix says otherwise
    extra_fields: bool = False  # headerless rows may carry trailing fields beyond ``headerless``
    column_labels: dict = field(default_factory=dict)  # column -> label names (a dataset's ClassLabel features)
    located: object = None  # hub_datasets.Located: any dataset that is not a known name
    also_for: tuple = ()  # other tasks that read it as it is (STS-B: scored pairs for embeddings)

    def labels_of(self, column) -> tuple | None:
        """The label names of ``column`` (its ClassLabel feature's), else the dataset's."""
        return (
            self.column_labels.get(column)
            if isinstance(column, str) and column in self.column_labels
            else (self.label_names)
        )

    def file_layout(self) -> dict:
        """How readers.read_records reads this dataset's local files."""
        return {"headerless": self.headerless, "suffix": self.suffix, "extra_fields": self.extra_fields}


GLUE_SPLITS = {"train": "train", "dev": "validation", "test": "test"}
ENTAILMENT = ("entailment", "not_entailment")
GO_EMOTIONS = (
    "admiration",
    "amusement",
    "anger",
    "annoyance",
    "approval",
    "caring",
    "confusion",
    "curiosity",
    "desire",
    "disappointment",
    "disapproval",
    "disgust",
    "embarrassment",
    "excitement",
    "fear",
    "gratitude",
    "grief",
    "joy",
    "love",
    "nervousness",
    "optimism",
    "pride",
    "realization",
    "relief",
    "remorse",
    "sadness",
    "surprise",
    "neutral",
)  # id order of the dataset (its labels.txt)


def _glue(name, task, columns, hub_columns, labels, files=None, **kw) -> DatasetSpec:
    files = files or {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"}
    # GLUE withholds test labels (the Hub fills in -1): those splits are for predict only.
    return DatasetSpec(
        name,
        task,
        files,
        "nyu-mll/glue",
        name,
        kw.pop("hub_splits", GLUE_SPLITS),
        columns,
        hub_columns,
        labels,
        unlabelled=("test",),
        **kw,
    )


_SINGLE = {"text": "sentence", "label": "label"}
DATASETS: dict[str, DatasetSpec] = {
    spec.name: spec
    for spec in [
        _glue("sst2", "cls", _SINGLE, _SINGLE, ("negative", "positive")),
        _glue(
            "cola",
            "cls",
            _SINGLE,
            _SINGLE,
            ("unacceptable", "acceptable"),
            headerless=("source", "label", "original_label", "sentence"),
        ),
        _glue(
            "mrpc",
            "pair",
            {"text": "#1 String", "text_pair": "#2 String", "label": "Quality"},
            {"text": "sentence1", "text_pair": "sentence2", "label": "label"},
            ("not_equivalent", "equivalent"),
        ),
        _glue(
            "rte",
            "pair",
            {"text": "sentence1", "text_pair": "sentence2", "label": "label"},
            {"text": "sentence1", "text_pair": "sentence2", "label": "label"},
            ENTAILMENT,
        ),
        _glue(
            "qnli",
            "pair",
            {"text": "question", "text_pair": "sentence", "label": "label"},
            {"text": "question", "text_pair": "sentence", "label": "label"},
            ENTAILMENT,
        ),
        _glue(
            "qqp",
            "pair",
            {"text": "question1", "text_pair": "question2", "label": "is_duplicate"},
            {"text": "question1", "text_pair": "question2", "label": "label"},
            ("not_duplicate", "duplicate"),
        ),
        _glue(
            "mnli",
            "pair",
            {"text": "sentence1", "text_pair": "sentence2", "label": "gold_label"},
            {"text": "premise", "text_pair": "hypothesis", "label": "label"},
            ("entailment", "neutral", "contradiction"),
            files={
                "train": "train.tsv",
                "dev": "dev_matched.tsv",
                "dev_mismatched": "dev_mismatched.tsv",
                "test": "test_matched.tsv",
            },
            hub_splits={
                "train": "train",
                "dev": "validation_matched",
                "dev_mismatched": "validation_mismatched",
                "test": "test_matched",
            },
        ),
        _glue(
            "stsb",
            "pair",
            {"text": "sentence1", "text_pair": "sentence2", "label": "score"},
            {"text": "sentence1", "text_pair": "sentence2", "label": "label"},
            None,
            # the STS benchmark's own files (GLUE's STS-B re-packs the same pairs): TAB-separated
            # despite the suffix, no header, some rows with two trailing source columns
            files={"train": "sts-train.csv", "dev": "sts-dev.csv", "test": "sts-test.csv"},
            headerless=("genre", "file", "year", "id", "score", "sentence1", "sentence2"),
            suffix=".tsv",
            extra_fields=True,
            problem_type="regression",
            also_for=("embedding",),
        ),
        DatasetSpec(
            "goemotions",
            "cls",
            {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"},
            "google-research-datasets/go_emotions",
            "simplified",
            GLUE_SPLITS,
            {"text": "text", "label": "labels"},
            {"text": "text", "label": "labels"},
            GO_EMOTIONS,
            headerless=("text", "labels", "id"),
            problem_type="multi-label",
            label_separator=",",
        ),
        DatasetSpec(
            "conll2003",
            "ner",
            {"train": "train.txt", "dev": "valid.txt", "test": "test.txt"},
            "eriktks/conll2003",
            None,
            GLUE_SPLITS,
            {},
            {"tokens": "tokens", "tags": "ner_tags"},
            ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"),
        ),
        DatasetSpec(
            "squad",
            "qa",
            {"train": "train-v1.1.json", "dev": "dev-v1.1.json"},
            "rajpurkar/squad",
            None,
            {"train": "train", "dev": "validation"},
        ),
        DatasetSpec(
            "squad_v2",
            "qa",
            {"train": "train-v2.0.json", "dev": "dev-v2.0.json"},
            "rajpurkar/squad_v2",
            None,
            {"train": "train", "dev": "validation"},
        ),
    ]
}
