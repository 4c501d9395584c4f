"""The task interface: everything a task adapter provides to the shared engine.

A task instance is configured (max length, options such as columns or doc stride, label names)
and can be rebuilt from ``state()``, which is what a saved model directory stores. Tasks never
touch devices: they turn examples into features (plain dicts of token ids plus meta columns)
and turn per-feature numpy outputs back into one prediction per example.

A task's methods return values and leave it as it is. Training is, in this order (api/finetuning.py):
``read`` (examples, with what reading saw) -> ``fit`` (what the data taught: a ``Learned``) ->
``with_learned`` (the trained task) -> ``preprocess`` (features with their stats) ->
``training_spec`` (what bertkit/networks/recipes.py builds) -> ``finished`` (the task saved).
Eval, predict and serve: ``task_from_state`` -> ``apply_options`` -> read, preprocess, decode.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from bertkit.data import formats, readers
from bertkit.data.registry import Source, read_hub
from bertkit.errors import BertkitError
from bertkit.tasks.learned import Examples, Features, Learned, seen_in  # noqa: F401 (the tasks' names)
from bertkit.tasks.panels import TASK_PANEL
from bertkit.tasks.training_spec import LossSpec, TrainingSpec

TRAIN, EVAL, PREDICT = "train", "eval", "predict"
# How the engine turns a target column of the features into a tensor (engine/batching.py):
# one class id per feature, one class id per token (padded with -100, ignored by the loss), one
# float per feature (regression), or a fixed-length 0/1 float vector per feature (multi-label).
CLASS, TOKEN_CLASS, FLOAT, MULTI_HOT = "class", "token_class", "float", "multi_hot"
SPAN = "span"  # QA's start and end positions: a loss over the window's real tokens (networks/losses.SpanLoss)


@dataclass(frozen=True)
class TaskOption:
    """A task setting, declared once: the CLI builds its flag from this (``--doc-stride``), the
    task reads its value from ``Task.options``. ``commands`` are the commands that offer the flag:
    a setting of the model (stride) is given at training and may be changed for eval/predict, one
    of a single run (n_best) only where it applies."""

    name: str
    type: type  # int, float, str or bool (a bool is a plain --flag)
    help: str
    commands: tuple = ("finetune",)
    default: object = None  # what the task uses when the option is not given (shown in --help)
    panel: str = TASK_PANEL  # its --help panel (bertkit/tasks/panels.py)


@dataclass(frozen=True)
class CardText:
    """What a task says in its model card (bertkit/reporting/card.py renders it).

    ``snippet`` and ``limitations`` are ``string.Template`` text: ``$model_dir``, ``$max_length``,
    ``$labels``, every option (its stored value, else its declared default) and every field of
    ``example`` are filled in as Python literals, so the snippet runs on exactly the input that
    ``example`` gives `bertkit predict` (one JSONL row) and the tests can compare the two answers.
    The defaults are what a task without card text gets: a valid card with no code in it."""

    hub_task: str | None = None  # the Hub's task id (model-index type), e.g. "text-classification"
    title: str = "Fine-tuned"  # its display name, e.g. "Text Classification"
    pipeline: bool = True  # transformers' pipeline(hub_task) loads the directory as it is (pipeline_tag)
    does: str = ""  # completes "it ...", e.g. "classifies a text"
    example: dict = field(default_factory=dict)
    snippet: str = ""
    cli: str = "`bertkit predict DIR --input FILE` (one JSON row per input)"
    limitations: str = ""


class Task(ABC):
    name: str
    model_class: str  # a transformers AutoModelFor... class name
    main_metric: str
    metric_scale: float = 1.0  # the main metric's full mark (SQuAD's exact match and F1 are percentages: 100)
    output_names: tuple = ("logits",)
    per_token_outputs: bool = False  # outputs have one row per token (NER, QA) rather than one per feature
    default_max_length: int = 128
    loss_target: str | None = None  # a loss computed outside the model (LossSpec.target); None: the model's own
    reads_first_token_only: bool = False  # the head uses only [CLS] of the last layer (see speedups.py)
    # the batch order a run gets unless --random-batches/--grouped says: the more accurate one
    # where measured over 3 seeds on a whole training set (docs/training.md), else length-grouped (faster)
    default_random_batches: bool = False
    summary: str = ""  # a few words for `bertkit finetune --help`
    options_declared: tuple = ()  # TaskOption per setting; ``option_names`` follows from it
    reading_options: tuple = ()  # how a data file is read (--delimiter, --data-format): never stored
    option_names: tuple = ()
    linear_probe: bool = False  # `bertkit probe` can read it: one label per text from a pooled vector
    greater_is_better: bool = True  # the direction of ``main_metric`` when choosing the best evaluation
    # feature key -> how its values become a tensor (CLASS, TOKEN_CLASS, FLOAT, MULTI_HOT): what the
    # engine collates and fingerprints besides the model inputs
    targets: dict = {"labels": CLASS}
    prediction_fields: dict = {}  # the keys of one `bertkit predict` row -> what each holds
    card_text: CardText = CardText()  # the task's words and code in its model card
    names_outputs: bool = False  # its outputs are labels named in bertkit.json (a saved one without is corrupt)
    calibrates: bool = False  # one softmax per row whose temperature calibration fits (bertkit/methods/calibration.py)
    conformal_sets: bool = False  # --coverage gives each row a split-conformal label set (conformal_scores)
    gold_fields: tuple = ()  # example fields an eval predictions row shows as the truth, as gold_<field>
    fold_group_field: str | None = None  # examples sharing its value stay in one fold (--folds)
    # a row's prediction depends on the rows around it (ner --context document): predict reads the
    # whole input as one chunk, so no neighbour is cut off by a chunk boundary
    whole_input: bool = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.option_names = tuple(option.name for option in cls.options_declared)

    def __init__(self, max_length: int | None = None, options: dict | None = None, labels: list | None = None):
        self.max_length = max_length or self.default_max_length
        self.options = {k: v for k, v in (options or {}).items() if k in self.option_names and v is not None}
        self.labels = list(labels) if labels else None
        self.learned = Learned()  # what training data taught it (``with_learned``): set once, never changed
        # The last preprocess's ``Features.stats``, only for callers not yet reading them from the
        # features (api/evaluation.py, api/prediction.py, some tests); no task reads it.
        self.stats: dict = {}

    def state(self) -> dict:
        return {"task": self.name, "max_length": self.max_length, "options": self.options, "labels": self.labels}

    # --- reading -------------------------------------------------------------------------
    def read(self, source: Source, purpose: str) -> list[dict]:
        """Examples from a Source (an ``Examples`` list where reading saw something ``fit`` needs);
        subclasses override for formats other than plain records. Reading never changes the task."""
        if source.path is None:
            return read_hub(source, self.from_records, purpose)
        layout = source.spec.file_layout() if source.spec else {}
        delimiter = readers.check_delimiter(self.options.get("delimiter"))  # --delimiter, where a task offers it
        return self.from_records(formats.read_records(source.path, **layout, delimiter=delimiter), source, purpose)

    @abstractmethod
    def from_records(self, records: list[dict], source: Source, purpose: str, hub: bool = False) -> list[dict]:
        """Canonical examples (task fields only) from raw records, validating them."""

    def fit(self, examples: list[dict], seen: dict | None = None) -> Learned:
        """What the training examples teach (label names, options such as the label kind or the
        column layout, the head bias), returned and not applied: ``with_learned`` applies it.
        ``seen``: what reading saw (``Examples.seen``; by default the examples' own)."""
        return Learned()

    def with_learned(self, learned: Learned) -> "Task":
        """A new task: this one as trained on what ``learned`` says (this one is left as it is)."""
        task = type(self)(
            self.max_length,
            {**self.options, **learned.options},
            self.labels if learned.labels is None else learned.labels,
        )
        task.learned = learned
        return task

    def fit_labels(self, examples: list[dict]) -> None:
        """``fit`` and ``with_learned`` in place: kept for callers that hold one task throughout
        (probing/command.py, tests). New code calls ``fit`` and uses the task ``with_learned`` gives."""
        self.__dict__.update(self.with_learned(self.fit(examples)).__dict__)

    def reported(self, features: list[dict], stats: dict) -> Features:
        """``preprocess``'s return: the features with their stats (mirrored in ``self.stats`` only
        for the callers that still read it there)."""
        self.stats = stats
        return Features(features, stats)

    def reads_whole(self, path) -> bool:
        """Whether `predict` must hand this file to ``read`` whole rather than stream its rows in
        chunks: a format without a chunked reader (a .json array, CoNLL), or a sniffed file."""
        fmt = formats.lookup(path.suffix)
        return fmt is None or not fmt.streams

    # --- options of one run ------------------------------------------------------------------
    def with_options(self, changes: dict) -> "Task":
        """A new task: this one's with ``changes`` merged into its options (a None value removes
        one). This task is left as it is, so a caller can decode at other settings for a moment."""
        task = type(self)(self.max_length, {**self.options, **changes}, self.labels)
        task.learned = self.learned
        return task

    def at_max_length(self, max_length: int) -> "Task":
        """A new task: this one reading at most ``max_length`` tokens (the model's limit is known once
        its config is loaded: models.choose_max_length). This task is left as it is."""
        task = type(self)(max_length, dict(self.options), self.labels)
        task.learned = self.learned
        return task

    def apply_options(self, given: dict | None, command: str) -> "Task":
        """This model's task with the options given to ``command`` (eval, predict, serve) merged in,
        checked once: every one must be the task's, and the result must fit this model."""
        given = {k: v for k, v in (given or {}).items() if v is not None}
        for key in sorted(set(given) - set(self.option_names)):
            raise BertkitError(
                f"--{key.replace('_', '-')} does not apply to a {self.name} model",
                f"drop that option (see `bertkit {command} --help`)",
            )
        task = self.with_options(given)
        task.check_options()
        return task

    def check_options(self) -> None:
        """Fail when this task's options (eval's, predict's merged in) do not fit this model; a
        hook of ``apply_options``, which callers use (a direct call still works)."""

    def check_training_options(self) -> None:
        """Fail on a training option that cannot work, from the options alone (no data, no model):
        `bertkit tune` asks before it creates its study. Most tasks check in ``__init__``; a task
        that checks while reading its data repeats those checks here."""

    def check_predictable(self) -> None:
        """Fail when this model cannot predict (`predict`, `serve`), before anything is loaded."""

    def check_probe_data(self, source: Source, examples: list[dict] | None = None) -> None:
        """Fail when the data just read (``examples``, else ``source``) is not one class per text
        (`bertkit probe` fits only that)."""

    def check_model_config(self, config, model: str) -> None:
        """Fail when the model (its transformers config, read before any weights) cannot train with
        this task's options (a Matryoshka dimension above the model's width)."""

    def check_eval_examples(self, examples: list[dict], source: Source) -> None:
        """Fail early when evaluation data cannot be scored by this model."""

    # --- the model side ----------------------------------------------------------------------
    def model_kwargs(self) -> dict:
        if not self.labels:
            return {}
        return {
            "num_labels": len(self.labels),
            "id2label": dict(enumerate(self.labels)),
            "label2id": {label: i for i, label in enumerate(self.labels)},
        }

    @abstractmethod
    def preprocess(self, examples: list[dict], tokenizer, train: bool) -> Features:
        """Features: ``input_ids``, ``token_type_ids``, targets when training, meta columns; with
        their stats (``Features.stats``, made by ``reported``)."""

    @abstractmethod
    def postprocess(self, examples: list[dict], features: list[dict], outputs: dict) -> list:
        """One prediction per example from per-feature outputs (``outputs[name][feature]``)."""

    @abstractmethod
    def metrics(self, examples: list[dict], predictions: list) -> dict:
        """Scores of predictions against the examples' gold fields; includes ``main_metric``."""

    @abstractmethod
    def format_prediction(self, example: dict, prediction) -> dict:
        """One JSON-serialisable row for ``bertkit predict``."""

    def gold(self, example: dict) -> dict:
        """The truth beside ``format_prediction``'s row in `bertkit eval`'s predictions file."""
        return {f"gold_{name}": plain(example.get(name)) for name in self.gold_fields}

    def baseline(self, examples: list[dict], features: list[dict] | None = None) -> dict | None:
        """This task's trivial baseline on these evaluation examples: what a model that learned
        nothing scores, from their gold labels, spans or tokens (``features``: the tokens where the
        task needs them), made by one of bertkit/metrics/baselines.py's functions; None: none."""
        return None

    def tune(self, examples: list[dict], features: list[dict], outputs: dict) -> dict:
        """Optionally tune decoding settings on evaluation data; returns what changed."""
        return {}

    def breakdown(self, examples: list[dict], predictions: list, metrics: dict) -> dict:
        """A small JSON breakdown of one evaluation for the figures (``kind`` names the figure:
        reporting/figures.py draws "confusion", "per_type", "qa_buckets"); {} draws none."""
        return {}

    # What `bertkit eval --metric` hands an `evaluate` module: (predictions, references), and how
    # that is described when a module refuses them. None: --metric is not supported.
    metric_inputs_description: str | None = None

    def metric_inputs(self, examples: list[dict], predictions: list) -> tuple:
        raise BertkitError(f"--metric does not support {self.name} models", "drop --metric")

    # --- how it trains: hooks with the plain fine-tuning behaviour as defaults -----------------
    directory_kind: str = "finetune"  # bertkit.json's "kind" of the directory it trains
    evaluate_before_training: bool = False  # score the starting model too (reported as "before")
    tunes_while_training: bool = False  # ``tune`` runs at each evaluation; the saved model's result is stored

    def fold_keys(self, examples: list[dict]) -> tuple[list | None, list | None]:
        """(stratify by, group by) for `finetune --folds`: labels to keep balanced, or sources whose
        examples must stay on one side (``fold_group_field``, where the examples have it); (None,
        None): a shuffled split."""
        groups = [ex.get(self.fold_group_field) for ex in examples] if self.fold_group_field else []
        return None, (groups if any(g is not None for g in groups) else None)

    def split_held_out(self, examples: list[dict], seed: int, where: str) -> tuple[list, list]:
        """(train, held-out) when no evaluation data is given; by default nothing is held out."""
        return examples, []

    def training_spec(self) -> TrainingSpec:
        """What the model trains with, as plain data: bertkit/networks/recipes.py builds the modules
        (the loss wrapper, the collator, the evaluation network, the model saved)."""
        return TrainingSpec(loss=LossSpec(self.loss_target) if self.loss_target else None)

    def finished(self) -> "Task":
        """The task as its model directory stores it once training is done (a regression whose
        scaling the saved head now holds); by default this task itself."""
        return self

    def as_stored(self) -> "Task":
        """The task without how this run's data file was read: what a model directory may keep
        when the task is stored again after training (a probe, eval storing tuned settings)."""
        dropped = {name: None for name in self.reading_options if name in self.options}
        return self.with_options(dropped) if dropped else self

    def directory_sections(self, finished: dict) -> dict:
        """Sections of bertkit.json this kind of directory adds (ModelMeta fields); ``finished``: what
        finishing the model did (networks/recipes.py ``Finished.facts``)."""
        return {}

    @classmethod
    def options_for(cls, command: str) -> tuple:
        return tuple(option for option in cls.options_declared if command in option.commands)


def plain(value):
    """A value as JSON writes it: tuples as lists, numpy scalars as numbers."""
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    return value.item() if hasattr(value, "item") and not isinstance(value, (str, bytes)) else value


def visible(text: str) -> bool:
    """Whether ``text`` shows anything: not only spaces, control and format characters (a zero-width
    space, a soft hyphen, NUL), which a tokenizer drops, leaving a model to score nothing at all."""
    import unicodedata

    return any(not ch.isspace() and unicodedata.category(ch)[0] not in "CZ" for ch in text)


def require_nonempty(examples: list[dict], fields: tuple, source: str) -> None:
    """One error listing how many rows have empty text (nothing ``visible``), and where."""
    empty = [i for i, ex in enumerate(examples) if any(not visible(str(ex.get(f) or "")) for f in fields)]
    if empty:
        where = ", ".join(str(i + 1) for i in empty[:5]) + (", ..." if len(empty) > 5 else "")
        raise BertkitError(f"{source}: {len(empty)} row(s) with empty text (rows {where})", "remove or fill those rows")
