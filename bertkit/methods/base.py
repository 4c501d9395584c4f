"""A training method: how a fine-tuning run trains, as one unit with hooks.

The finetune spine (bertkit/api/finetuning.py) reads the data, loads the model, preprocesses,
trains, finishes and saves; at fixed points it calls every chosen method's hooks, in the order the
methods were chosen, and names no method itself. A method implements only the hooks it needs:
every default below changes nothing. What a method is (the tasks it serves, the methods it composes
with, the options it reads, the run modes it refuses) is declared as class attributes, so a
combination is checked before any model loads (bertkit/methods/__init__.py: ``check_methods``).

Imitates setfit's ``trainer_distillation.py`` (a trainer that overrides three hooks) and spaCy's
``training/loop.py`` hook points; registered like bertkit/tasks/label_kinds.py's kinds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bertkit.errors import BertkitError

# The run modes a method may refuse (the spine's callers: api/seeds.py, api/folds.py, api/tuning.py)
SINGLE, SEEDS, FOLDS, TUNE, RESUME = "single", "seeds", "folds", "tune", "resume"
MODES = (SINGLE, SEEDS, FOLDS, TUNE, RESUME)


@dataclass
class Run:
    """What the spine knows at a hook, filled in as the run goes (a hook reads what it needs)."""

    plan: object  # training/plan.RunPlan: the checked call
    adapter: object = None  # the task, fitted on the training data
    model_ref: str = ""  # where the weights load from (a resolved --model)
    tokenizer: object = None
    engine: object = None
    train_examples: list = field(default_factory=list)
    eval_examples: list = field(default_factory=list)
    train_features: list = field(default_factory=list)  # what the engine trains on (a method may replace them)
    eval_features: list = field(default_factory=list)
    preprocessing: dict = field(default_factory=dict)
    metrics: dict | None = None  # set by a method whose model is scored when it is finished (SetFit's head)
    notices: list = field(default_factory=list)  # said now and kept in the result


class Method:
    """The interface, with no-op defaults. Class attributes are the declaration."""

    name: str = ""
    flag: str = ""  # how a user chose it, for messages: "--lora", "--recipe setfit", "bertkit distill"
    tasks: tuple | None = None  # the finetune tasks it serves (None: every finetune task)
    composes_with: tuple = ()  # the other methods it runs together with (one side's declaration is enough)
    replaces_training: bool = False  # trains something else than the task model (exactly one method may)
    refused_modes: tuple = ()  # of MODES: the run modes it cannot take part in
    refused_task_options: dict = {}  # task option -> the values it cannot train with (``check_plan``)
    section: str | None = None  # its bertkit.json section (None: it records nothing of its own)
    owned_files: tuple = ()  # the files it writes into a model directory (model_dir/ownership.py lists them)

    def __init__(self, request=None):
        self.request = request  # what chose it (a TrainConfig, DistillOptions, ...), for its hooks

    # --- declared choice ---------------------------------------------------------------------------
    @classmethod
    def requested(cls, config) -> bool:
        """Whether a run with ``config`` (a TrainConfig) chose this method by its options."""
        return False

    @classmethod
    def served_tasks(cls) -> tuple | None:
        """The tasks it serves (None: every task); a method may compute them from the task registry."""
        return cls.tasks

    # --- before any model loads ---------------------------------------------------------------------
    def check_plan(self, plan) -> None:
        """Refuse what this method cannot do with the plan (its task options, its run modes)."""
        options = plan.adapter.options
        for option, refused in self.refused_task_options.items():
            value = options.get(option)
            if value is not None and str(value) in refused:
                flag = f"--{option.replace('_', '-')} {value}"
                raise BertkitError(f"{self.flag} does not compose with {flag}", f"drop {flag}, or {self.flag}")

    def check_data(self, run: Run) -> None:
        """Refuse data it cannot train on (``run.adapter`` is fitted, the examples are read)."""

    # --- the network --------------------------------------------------------------------------------
    def load_network(self, run: Run):
        """The network to train instead of the task model (None: the task model, as loaded)."""
        return None

    def adapt_network(self, network, run: Run):
        """The loaded network changed before training (fewer layers, adapters)."""
        return network

    # --- features and training ----------------------------------------------------------------------
    def training_features(self, features: list, run: Run) -> list:
        """The features the engine trains on (with a method's own targets)."""
        return features

    def training_spec(self, spec):
        """What trains (tasks/training_spec.py); a method that trains another network says so here."""
        return spec

    def training_targets(self, targets: dict) -> dict:
        """The feature keys the engine collates as targets."""
        return targets

    evaluates_while_training: bool = True  # False: the trained network is scored when finished

    def training_network(self, network, run: Run):
        return network

    def collator(self, collator, run: Run):
        return collator

    def trained_network(self, network):
        """The network as trained, without what ``training_network`` wrapped around it."""
        return network

    # --- finishing and saving -----------------------------------------------------------------------
    def finish(self, finished, run: Run) -> None:
        """The model to save (``finished.model``), changed in place; may set ``run.metrics``."""

    def sections(self, finished, run: Run) -> dict:
        """Its bertkit.json section(s): {section name: contents}."""
        return {}

    def baselines(self, run: Run) -> list[dict]:
        """Scores on the run's evaluation data the trained model is read against besides its task's
        trivial baseline (bertkit/metrics/baselines.py ``reference``: a distilled student's teacher)."""
        return []

    def save_files(self, staging, finished, run: Run) -> None:
        """Its own files into the staged directory (beside the model's)."""

    # --- a saved directory (read from bertkit.json; no run) -------------------------------------------
    @classmethod
    def recorded_in(cls, meta: dict) -> bool:
        """Whether the directory ``meta`` describes was trained with this method."""
        return bool(cls.section and meta.get(cls.section))

    @classmethod
    def card_lines(cls, meta: dict) -> list[str]:
        """Its lines in the model card's summary."""
        return []

    @classmethod
    def card_procedure(cls, meta: dict, public_name) -> list[str]:
        """Its lines under the card's training procedure; ``public_name`` shows a local path by its name."""
        return []

    @classmethod
    def card_usage(cls, meta: dict, model_name: str, hub_id) -> str | None:
        """The card's usage snippet, when the directory loads in its own way (None: the task's);
        ``hub_id(name)``: a Hub id for a model name, None for a local path."""
        return None

    @classmethod
    def ordinary_weights(cls, meta: dict) -> bool:
        """Whether the directory's weights load as a plain transformers task model (what a distill
        teacher, and a student made of its layers, must be)."""
        return True

    @classmethod
    def load_trained(cls, model_dir: str, meta: dict, model_class: str, model_config):
        """The directory's task model, when this method saved it in its own way (None: the usual way)."""
        return None
