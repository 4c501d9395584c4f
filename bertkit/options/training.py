"""The training family's options (finetune, tune, pretrain), each a dataclass field with its type,
default and help.

The CLI builds its flags from these fields (bertkit/cli/options.py), so every command that trains
accepts every training option and the copies cannot drift. ``TrainConfig`` holds the
hyperparameters (validated once, before any work starts); ``RunOptions`` what a training command
reads and writes; ``RepeatOptions`` and ``TuneOptions`` the repeated runs and the search.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from bertkit.errors import BertkitError
from bertkit.options.base import (
    CALIBRATION_PANEL,
    DATA_PANEL,
    INFERENCE_BATCH,
    LONG_PANEL,
    LORA_PANEL,
    MAX_SEED,
    MODEL_PANEL,
    OUTPUT_PANEL,
    REQUIRED,
    TRAINING_PANEL,
    DatasetOptions,
    batch_size_option,
    calibration_data_option,
    check_at_least,
    check_batch_size,
    check_choice,
    check_max_length,
    check_precision,
    fail,
    max_length_option,
    option,
    precision_option,
    threads_option,
)

PACKING_CHOICES = ("auto", "on", "off")  # finetune --packing (networks/packed.py, networks/packed_heads.py)
COMPILE_CHOICES = ("auto", "on", "off")  # finetune --compile (engine/compilation.py)
# BERT's pre-training recipe (api/pretraining.py says it at the start of a run), not a family's
# fine-tuning one: a fine-tuning learning rate leaves one epoch's NSP at chance; no layer decay
PRETRAIN_RECIPE = {"lr": 1e-4, "warmup_ratio": 0.1, "weight_decay": 0.01, "layer_decay": 1.0}


@dataclass
class TrainConfig(DatasetOptions):
    """The BERT paper's fine-tuning recipe as defaults (Devlin et al., 2019, appendix A.3), with the
    learning rate, warmup, weight decay and layer decay of the model's family where not given
    (None: bertkit/tasks/family_recipes.py fills them once the model is known); and, as
    ``max_train_samples``, which data it reads (DatasetOptions: a Hub dataset's config, splits)."""

    epochs: float = option(3.0, "Training epochs (fractions allowed).")
    lr: float | None = option(
        None, "Peak learning rate; default: the model family's (BERT 2e-5, RoBERTa 1e-5, ELECTRA 1e-4: training.md)."
    )
    batch_size: int = batch_size_option("training", TRAINING_PANEL)
    eval_batch_size: int = option(INFERENCE_BATCH, "Batch size for evaluation.")
    # None: the task's default (Task.default_max_length); batches are padded to their own longest row
    max_length: int | None = max_length_option("training", TRAINING_PANEL)
    warmup_ratio: float | None = option(
        None,
        "Share of steps with linear warmup, then linear decay to 0; default: the family's (BERT 0.1, RoBERTa 0.06).",
    )
    weight_decay: float | None = option(
        None, "AdamW weight decay (not on biases and LayerNorm); default: the family's (BERT 0.01, RoBERTa 0.1)."
    )
    layer_decay: float | None = option(
        None,
        "Layer-wise learning-rate decay: each layer below the top trains at this times the rate of the one above "
        "(embeddings lowest); 1: none; default: the family's (ELECTRA 0.8, large 0.9; others 1).",
    )
    grad_accum: int = option(1, "Gradient accumulation steps.")
    max_grad_norm: float = option(1.0, "Gradient clipping norm (0: off).")
    precision: str = precision_option(TRAINING_PANEL)
    # over half of a small model's weights are the word embeddings: no gradient, no optimizer state
    freeze_embeddings: bool = option(
        False, "Do not train the word embeddings (faster; docs: training.md, accuracy cost).", flag=True
    )
    lazy_embeddings: bool | None = option(
        None,
        "AdamW updates only the word-embedding rows a batch uses (TF's LazyAdam; docs: training.md). Default: on "
        "where it applies (a CPU, one process, word embeddings of their own), measured as accurate over "
        "3 seeds and faster there.",
        flag="--lazy-embeddings/--no-lazy",
    )
    save_memory: bool = option(
        False,
        "Recompute attention in backward: same numbers, much less memory for long sequences (qa), slower steps.",
        flag=True,
    )
    # auto packs where it was measured faster: the bi-encoder's and SetFit's towers, and a task head's random
    # batches (1.72x / 1.63x the padded random step, SST-2 / CoNLL), not length-grouped ones (0.95x / 0.94x;
    # MiniLM bf16, benchmarks/results/packing_steps_bucketed.md)
    packing: str = option(
        "auto",
        "Training on each batch's real tokens only (the padded batch's logits, loss and gradients): auto "
        "packs embedding/SetFit towers and random batches (ner's default, --random-batches) on a CPU (faster "
        "there), on packs length-grouped batches too (slower on a CPU; on CUDA: variable-length attention, "
        "unmeasured), off packs nothing (docs: scale.md).",
        choices=PACKING_CHOICES,
    )
    compile: str = option(
        "auto",
        "torch.compile the encoder layers while training: auto times 10 steps, then compiles when the run left "
        "pays back the compile time (cached for the next run); on from the first step; off never (docs: scale.md).",
        choices=COMPILE_CHOICES,
    )
    random_batches: bool | None = option(
        None,
        "Random batches (packed: --packing auto) or rows of similar length batched together (shuffled groups, as "
        "transformers' group_by_length). Default: the task's better one, measured over 3 seeds on whole training "
        "sets: random for ner (+1.3 entity F1 on CoNLL-2003, 0.88-0.95x the speed), grouped for the others "
        "(SST-2 as accurate, faster) (docs: training.md).",
        flag="--random-batches/--grouped",
    )
    seed: int = option(42, "Random seed (data order, head initialisation, dropout).")
    max_train_samples: int | None = option(None, "Use only the first N training examples.", DATA_PANEL)
    max_eval_samples: int | None = option(None, "Use only the first N evaluation examples.", DATA_PANEL)
    patience: int | None = option(None, "Stop after N evaluations without improvement of the main metric.")
    # task-specific settings (doc stride, columns...): declared by the task (TaskOption), validated by it
    task_options: dict = field(default_factory=dict)
    max_steps: int | None = option(None, "Optimizer steps to train (overrides --epochs).", LONG_PANEL)
    eval_every: int | None = option(None, "Evaluate every N steps (default: after every epoch).", LONG_PANEL)
    log_every: int = option(10, "Log loss, learning rate, gradient norm to history.jsonl every N steps.", LONG_PANEL)
    save_every: int | None = option(
        None,
        "Save a resumable checkpoint every N steps into <output>.checkpoints/step-N (Ctrl-C then saves one and stops).",
        LONG_PANEL,
    )
    keep_checkpoints: int | None = option(
        None, "Keep the K newest checkpoints plus the best (default: all).", LONG_PANEL
    )
    # LoRA (bertkit/networks/lora.py): None everywhere is full fine-tuning
    lora: int | None = option(
        None,
        "Train LoRA adapters of rank R (peft) instead of every weight: the encoder stays frozen, the task head "
        "trains; the output is saved merged (a plain transformers model).",
        LORA_PANEL,
        metavar="R",
    )
    lora_alpha: float | None = option(
        None, "LoRA alpha: the update is scaled by alpha/R; default 2R (a scale of 2 at any rank).", LORA_PANEL
    )
    lora_dropout: float | None = option(None, "Dropout on the adapters' input, in [0, 1); default 0.1.", LORA_PANEL)
    lora_targets: str | None = option(
        None,
        "Comma-separated linear layers to adapt (names or name endings); default the attention's query and value "
        "projections (query,value for BERT).",
        LORA_PANEL,
    )
    save_adapter: bool = option(
        False,
        "With --lora: save only the adapters and the head (peft's format) and the base model's name; eval, predict "
        "and serve load them over the base model.",
        LORA_PANEL,
        flag=True,
    )
    # calibration (bertkit/methods/calibration.py): one temperature fitted after training
    calibrate: bool = option(
        False,
        "cls/pair single-label: fit a temperature on the dev split (or --calibration-data) after training, "
        "store it and the conformal scores; report ECE and Brier before and after (docs: calibration.md).",
        CALIBRATION_PANEL,
        flag=True,
    )
    calibration_data: str | None = calibration_data_option("training")

    def validate(self, command: str = "bertkit finetune") -> "TrainConfig":
        """Self, once every value is in range; ``command`` is named in the hint (its --help)."""
        named = ("epochs", "lr", "warmup_ratio", "weight_decay", "layer_decay", "max_grad_norm")
        # None: the model family's (bertkit/tasks/family_recipes.py), filled once the model is known
        floats = {n.replace("_", "-"): getattr(self, n) for n in named if getattr(self, n) is not None}
        checks = [
            *(
                (math.isfinite(value), f"--{name} must be a finite number, got {value}")
                for name, value in floats.items()
            ),
            (self.epochs > 0, "--epochs must be > 0"),
            (self.lr is None or self.lr > 0, "--lr must be > 0"),
            (0 <= self.seed <= MAX_SEED, f"--seed must be between 0 and {MAX_SEED}"),
            (self.warmup_ratio is None or 0 <= self.warmup_ratio < 1, "--warmup-ratio must be in [0, 1)"),
            (self.weight_decay is None or self.weight_decay >= 0, "--weight-decay must be >= 0"),
            (self.layer_decay is None or 0 < self.layer_decay <= 1, "--layer-decay must be in (0, 1] (1: none)"),
            (self.max_grad_norm >= 0, "--max-grad-norm must be >= 0 (0 turns clipping off)"),
        ]
        for ok, message in checks:
            if not ok:
                fail(message, command)
        check_batch_size(self.batch_size, command)
        check_batch_size(self.eval_batch_size, command, "--eval-batch-size")
        check_max_length(self.max_length, command)
        counts = {
            "grad-accum": self.grad_accum,
            "max-train-samples": self.max_train_samples,
            "max-eval-samples": self.max_eval_samples,
            "patience": self.patience,
            "max-steps": self.max_steps,
            "eval-every": self.eval_every,
            "log-every": self.log_every,
            "save-every": self.save_every,
            "keep-checkpoints": self.keep_checkpoints,
        }
        for name, value in counts.items():
            check_at_least(value, f"--{name}", command)
        check_precision(self.precision)
        check_choice(self.packing, PACKING_CHOICES, "--packing")
        check_choice(self.compile, COMPILE_CHOICES, "--compile")
        if self.compile == "on" and self.packing == "on":
            raise BertkitError("--compile on runs the padded batches --packing on leaves out", "drop one of them")
        if self.keep_checkpoints is not None and self.save_every is None:
            raise BertkitError("--keep-checkpoints applies only with --save-every", "add --save-every N")
        check_lora(self, command)
        if self.calibration_data is not None and not self.calibrate:
            raise BertkitError("--calibration-data applies only with --calibrate", "add --calibrate, or drop it")
        if self.lazy_embeddings and (self.precision == "fp16" or self.freeze_embeddings):
            # the engine's rule (engine/optimisation.py), where no model is needed to see it: before
            # a cache (distill's teacher logits) or a study (tune) is written
            from bertkit.engine.runtime_text import lazy_embeddings_refused

            raise lazy_embeddings_refused()
        return self

    def to_dict(self) -> dict:
        return asdict(self)


LORA_DEFAULT_DROPOUT = 0.1
LORA_FIELDS = ("lora", "lora_alpha", "lora_dropout", "lora_targets", "save_adapter")  # finetune's and tune's only


def check_lora(config: TrainConfig, command: str) -> None:
    """--lora's companions only with it, each in its range (the targets are checked on the model)."""
    if config.lora is None:
        given = [name for name in LORA_FIELDS[1:] if getattr(config, name) not in (None, False)]
        if given:
            flags = ", ".join(f"--{name.replace('_', '-')}" for name in given)
            raise BertkitError(f"{flags} applies only with --lora", "add --lora R (e.g. --lora 8), or drop it")
        return
    if config.lora < 1:
        fail(f"--lora is the adapters' rank, a whole number >= 1, got {config.lora}", command)
    alpha, dropout = config.lora_alpha, config.lora_dropout
    if alpha is not None and not (math.isfinite(alpha) and alpha > 0):
        fail(f"--lora-alpha must be a finite number > 0, got {alpha}", command)
    if dropout is not None and not (math.isfinite(dropout) and 0 <= dropout < 1):
        fail(f"--lora-dropout must be in [0, 1), got {dropout}", command)
    if config.lora_targets is not None and not [t for t in config.lora_targets.split(",") if t.strip()]:
        fail("--lora-targets names no layer", command)
    if config.lazy_embeddings:
        raise BertkitError(
            "--lazy-embeddings updates word embeddings that --lora freezes", "drop --lazy-embeddings or --lora"
        )


@dataclass
class RunOptions:
    """What a training command reads and writes, besides its hyperparameters."""

    data: str = option(
        REQUIRED,
        "A known dataset name (see `bertkit datasets`), a file, a Hub dataset id (imdb, owner/name) or a "
        "dataset directory (save_to_disk, or the Hub's layout).",
        DATA_PANEL,
    )
    eval_data: str | None = option(
        None, "Evaluation data; default: the known dataset's dev split, a Hub dataset's --eval-split.", DATA_PANEL
    )
    data_dir: str | None = option(
        None,
        "Local data directory with the original files (<dir>/sst2/train.tsv ...); default $BERTKIT_DATA_DIR, "
        "else ../shared/data (docs: data.md).",
        DATA_PANEL,
    )
    # None: bertkit.models.default_model() (bert-base-uncased; offline, the bundled MiniLM)
    model: str | None = option(
        None,
        "Hub name, local directory, or 'minilm' (bundled, offline); default bert-base-uncased (the Hub "
        "unreachable: minilm, said so).",
        MODEL_PANEL,
    )
    output: str | None = option(
        None, "Model directory to create (parents too); default runs/<task>-<data>.", MODEL_PANEL
    )
    overwrite: bool = option(
        False,
        "Replace an existing model directory written by bertkit (only once training "
        "succeeded); other directories are never replaced.",
        MODEL_PANEL,
        flag=True,
    )
    threads: int | None = threads_option(TRAINING_PANEL)
    report_to: str = option(
        "none",
        "Trackers: tensorboard, wandb, mlflow, all or none (comma-separated allowed); logs go to <output>.logs/.",
        OUTPUT_PANEL,
    )
    resume: bool = option(
        False,
        "Continue from the newest complete checkpoint of --output (same command line otherwise); with "
        "--folds: keep the folds that finished, train the others.",
        LONG_PANEL,
        flag=True,
    )
    resume_from: str | None = option(None, "Continue from this checkpoint directory instead.", LONG_PANEL)


@dataclass
class RepeatOptions:
    """One recipe trained several times (bertkit.api.seeds): the spread says how sure a number is."""

    seeds: str | None = option(
        None,
        "Train once per seed: a count (3: --seed and the next two) or a list "
        "(42,43,44); prints mean ± std; the best run's model is the output. With "
        "--threads T, cores/T seeds train at once.",
    )
    folds: int | None = option(
        None,
        "k-fold cross-validation on --data (no dev split needed): K runs, "
        "out-of-fold predictions, mean ± std; the best fold's model is the output.",
    )
    keep_all: bool = option(
        False,
        "With --seeds/--folds: keep every run's model in <output>.seeds/ or .folds/ "
        "(default: only the best, at --output).",
        MODEL_PANEL,
        flag=True,
    )


@dataclass
class TuneOptions:
    """A hyperparameter search (bertkit.api.tuning)."""

    trials: int = option(
        20, "Trials in the study, counted across every process that shares it (complete, pruned or running)."
    )
    storage: str | None = option(
        None,
        "Optuna RDB URL of the study (default: a SQLite file in <output>.tune/); "
        "several processes or machines can share one.",
    )
    study_name: str | None = option(
        None,
        "Study name (default: bertkit, the task and the output directory name, joined by hyphens); the same "
        "name resumes it.",
    )
    space: str | None = option(
        None,
        "YAML/JSON search space (default: lr 1e-5..1e-4 log, batch 16/32, 2-4 "
        "epochs, warmup 0-0.2, weight decay 0-0.1); a flag given fixes that value.",
    )
    fixed: tuple = ()  # not a flag: the hyperparameters given on the command line, left out of the space


def parse_seeds(value: str | list[int] | None, first: int) -> list[int] | None:
    """``--seeds 3`` -> [first, first+1, first+2]; ``--seeds 42,43,44`` (or the list [42, 43, 44]) -> that list."""
    if value is None:
        return None
    if isinstance(value, (list, tuple)):  # the API's list, as the command line's 42,43,44
        return _checked_seeds([int(n) for n in value], value) if value else []
    text = str(value).strip()
    try:
        numbers = [int(part) for part in text.split(",")] if "," in text else None
        count = None if numbers else int(text)
    except ValueError:
        raise BertkitError(
            f"--seeds {value!r} is neither a count nor a list of seeds", "e.g. --seeds 3 or --seeds 42,43,44"
        ) from None
    if numbers is None:
        if not 1 <= count <= 100:
            raise BertkitError(f"--seeds must be between 1 and 100 runs, got {count}", "e.g. --seeds 3")
        numbers = list(range(first, first + count))
    return _checked_seeds(numbers, value)


def _checked_seeds(numbers: list[int], value) -> list[int]:
    if len(set(numbers)) != len(numbers) or any(n < 0 for n in numbers):
        raise BertkitError(f"--seeds {value}: seeds must be distinct and >= 0", "e.g. --seeds 42,43,44")
    if max(numbers) > MAX_SEED:
        raise BertkitError(
            f"--seeds {value}: seed {max(numbers)} is above {MAX_SEED}, the largest seed numpy takes",
            "use smaller seeds, e.g. --seeds 42,43,44",
        )
    return numbers
