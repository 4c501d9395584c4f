"""Training hyperparameters: one documented field each, validated once before any work starts."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from bertkit.errors import BertkitError

PRECISIONS = ("auto", "no", "fp16", "bf16")


@dataclass
class TrainConfig:
    """The BERT paper's fine-tuning recipe as defaults (Devlin et al., 2019, appendix A.3)."""

    epochs: float = 3.0
    """Passes over the training set; a fraction trains on that share of the last epoch."""
    lr: float = 2e-5
    """Peak AdamW learning rate, reached after warmup and then decayed linearly to zero."""
    batch_size: int = 32
    """Examples (features, for windowed tasks) per optimizer step per device, before accumulation."""
    eval_batch_size: int = 64
    max_length: int | None = None
    """Longest tokenised sequence (None: the task's default, 128, or 384 for QA); batches are
    padded only to their own longest row."""
    warmup_ratio: float = 0.1
    weight_decay: float = 0.01
    """Decoupled weight decay, not applied to biases and LayerNorm weights."""
    grad_accum: int = 1
    max_grad_norm: float = 1.0
    freeze_embeddings: bool = False
    """Keep the word-embedding matrix fixed: no gradient, no optimizer state for its vocab x hidden
    weights (over half of a small model's parameters); faster, at a measured accuracy cost."""
    save_memory: bool = False
    """Recompute self-attention in the backward pass instead of keeping its length² probabilities
    (same numbers; for long sequences, e.g. QA at 384: less than half the peak memory, slower steps)."""
    precision: str = "auto"
    """auto: bf16 where the hardware computes it natively, else no (fp32); see bertkit.engine.precision."""
    seed: int = 42
    max_train_samples: int | None = None
    max_eval_samples: int | None = None
    patience: int | None = None
    """Stop after this many evaluations without improvement of the main metric (None: never)."""
    task_options: dict = field(default_factory=dict)
    """Task-specific settings (doc stride, answer length, columns...), validated by the task."""
    # --- long runs (see training_state.py and history.py) ---
    max_steps: int | None = None
    """Optimizer steps to train; overrides ``epochs`` (the schedule spans exactly these steps)."""
    eval_every: int | None = None
    """Evaluate every N optimizer steps (None: after every epoch); best weights are kept per evaluation."""
    log_every: int = 10
    """Write training loss, learning rate and gradient norm to history.jsonl every N steps."""
    save_every: int | None = None
    """Save a complete, resumable training state every N optimizer steps (None: never)."""
    keep_checkpoints: int | None = None
    """Keep only the K newest checkpoints plus the best one (None: keep every checkpoint)."""

    def validate(self) -> "TrainConfig":
        checks = [
            (self.epochs > 0, "--epochs must be > 0"),
            (self.lr > 0, "--lr must be > 0"),
            (self.batch_size >= 1, "--batch-size must be >= 1"),
            (self.eval_batch_size >= 1, "--eval-batch-size must be >= 1"),
            (self.max_length is None or 8 <= self.max_length <= 8192, "--max-length must be between 8 and 8192"),
            (0 <= self.warmup_ratio < 1, "--warmup-ratio must be in [0, 1)"),
            (self.weight_decay >= 0, "--weight-decay must be >= 0"),
            (self.grad_accum >= 1, "--grad-accum must be >= 1"),
            (self.max_grad_norm >= 0, "--max-grad-norm must be >= 0 (0 turns clipping off)"),
            (self.max_train_samples is None or self.max_train_samples >= 1, "--max-train-samples must be >= 1"),
            (self.max_eval_samples is None or self.max_eval_samples >= 1, "--max-eval-samples must be >= 1"),
            (self.patience is None or self.patience >= 1, "--patience must be >= 1"),
            (self.max_steps is None or self.max_steps >= 1, "--max-steps must be >= 1"),
            (self.eval_every is None or self.eval_every >= 1, "--eval-every must be >= 1"),
            (self.log_every >= 1, "--log-every must be >= 1"),
            (self.save_every is None or self.save_every >= 1, "--save-every must be >= 1"),
            (self.keep_checkpoints is None or self.keep_checkpoints >= 1, "--keep-checkpoints must be >= 1"),
        ]
        for ok, message in checks:
            if not ok:
                raise BertkitError(message, "see `bertkit finetune --help` for the accepted values")
        if self.precision not in PRECISIONS:
            raise BertkitError(f"unknown --precision {self.precision!r}", f"use one of {', '.join(PRECISIONS)}")
        if self.keep_checkpoints is not None and self.save_every is None:
            raise BertkitError("--keep-checkpoints applies only with --save-every", "add --save-every N")
        return self

    def to_dict(self) -> dict:
        return asdict(self)
