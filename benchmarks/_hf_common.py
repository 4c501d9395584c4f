"""Shared plumbing for the HuggingFace baselines: training arguments, a padding-counting collator
wrapper, RSS / FLOP helpers and process isolation.

Notes on the transformers 5.x API (checked against the installed 5.23 source):
  * ``warmup_ratio`` is gone: ``warmup_steps`` takes a float in [0, 1) as a ratio of total steps.
  * ``group_by_length=True`` is now ``train_sampling_strategy="group_by_length"``.
  * ``evaluation_strategy`` -> ``eval_strategy``; ``overwrite_output_dir`` removed;
    ``Trainer(tokenizer=...)`` -> ``Trainer(processing_class=...)``; ``report_to`` defaults to "none".
  * default ``optim`` is ``"adamw_torch_fused"`` (torch >= 2.8); we keep the default.
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import tempfile
import time
from typing import Any, Callable

import torch

# torch's default intra-op thread count, captured before anyone changes it.
DEFAULT_THREADS = torch.get_num_threads()


def quiet() -> None:
    """Silence transformers / datasets chatter (warnings about fresh heads, progress bars)."""
    import datasets
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()  # 5.x shows a "Loading weights" tqdm bar per from_pretrained
    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_error()


def set_threads(num_threads: int | None) -> int:
    n = int(num_threads) if num_threads else DEFAULT_THREADS
    torch.set_num_threads(n)
    return n


def peak_rss_mb() -> float:
    """Peak resident set size of THIS PROCESS so far (ru_maxrss; KiB on Linux). It is a process-wide max:
    run each baseline in its own process (see ``run_isolated``) to attribute it to one run."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def current_rss_mb() -> float:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        return float("nan")


@contextlib.contextmanager
def temp_output_dir(prefix: str = "bertkit-hf-"):
    d = tempfile.mkdtemp(prefix=prefix)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


class CountingCollator:
    """Wraps a data collator and counts real (attention_mask == 1) vs all tokens in the batches it builds.

    Stats are kept per phase ("train" / "eval"); set ``.phase`` before the loop, ``None`` to stop counting.
    dataloader_num_workers=0 (the Trainer default) keeps collation in this process, so counts are exact.
    """

    def __init__(self, inner: Callable):
        self.inner = inner
        self.phase: str | None = None
        self.stats: dict[str, dict[str, int]] = {}

    def __call__(self, features):
        batch = self.inner(features)
        if self.phase is not None:
            am = batch["attention_mask"]
            b, s = am.shape
            st = self.stats.setdefault(
                self.phase, {"batches": 0, "rows": 0, "real_tokens": 0, "total_tokens": 0, "sum_b_s2": 0, "max_len": 0}
            )
            st["batches"] += 1
            st["rows"] += b
            st["real_tokens"] += int(am.sum())
            st["total_tokens"] += b * s
            st["sum_b_s2"] += b * s * s
            st["max_len"] = max(st["max_len"], s)
        return batch

    def get(self, phase: str) -> dict[str, int]:
        return self.stats.get(
            phase, {"batches": 0, "rows": 0, "real_tokens": 0, "total_tokens": 0, "sum_b_s2": 0, "max_len": 0}
        )


def training_args(
    output_dir: str,
    *,
    epochs: float,
    lr: float,
    batch_size: int,
    seed: int,
    eval_batch_size: int = 8,
    best: bool = False,
    warmup_ratio: float = 0.1,
    weight_decay: float = 0.01,
    **extra: Any,
):
    """TrainingArguments for the baselines: example-script defaults + the bertkit BERT recipe's
    warmup 0.1 / weight decay 0.01; no saving, no logging, no reporting, no tqdm."""
    from transformers import TrainingArguments

    kw: dict[str, Any] = dict(
        output_dir=output_dir,
        per_device_train_batch_size=batch_size,
        per_device_eval_batch_size=eval_batch_size,
        learning_rate=lr,
        num_train_epochs=epochs,
        seed=seed,
        warmup_steps=warmup_ratio,  # 5.x: float in [0,1) == ratio (old warmup_ratio)
        weight_decay=weight_decay,
        save_strategy="no",
        eval_strategy="no",
        logging_strategy="no",
        report_to="none",
        disable_tqdm=True,
        use_cpu=True,
    )
    if best:
        kw["train_sampling_strategy"] = "group_by_length"  # 5.x name of group_by_length=True
    kw.update(extra)
    return TrainingArguments(**kw)


def make_trainer(**kwargs):
    """``transformers.Trainer(**kwargs)`` minus the PrinterCallback that disable_tqdm=True installs (it would
    still print the end-of-training metrics dict even with logging_strategy="no")."""
    from transformers import Trainer
    from transformers.trainer_callback import PrinterCallback

    trainer = Trainer(**kwargs)
    trainer.remove_callback(PrinterCallback)
    return trainer


def bert_train_flops(config, total_tokens: int, sum_b_s2: int) -> float:
    """Approximate training FLOPs (forward + backward = 3x forward) of a BERT encoder over the batches
    actually fed (padding included: padded positions are computed too).

    forward per layer: dense 2*T*(4H^2 + 2*H*I)  +  attention scores/context 4*H*sum(B*S^2).
    Embedding lookups and the small task heads are ignored.
    """
    h, i, n_layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    fwd = n_layers * (2.0 * total_tokens * (4 * h * h + 2 * h * i) + 4.0 * h * sum_b_s2)
    return 3.0 * fwd


def throughput_fields(prefix: str, stats: dict[str, int], seconds: float, config=None) -> dict[str, Any]:
    """Common token/padding measurements from a CountingCollator phase."""
    real, total = stats["real_tokens"], stats["total_tokens"]
    out: dict[str, Any] = {
        f"{prefix}_batches": stats["batches"],
        f"{prefix}_rows_fed": stats["rows"],
        f"{prefix}_real_tokens": real,
        f"{prefix}_total_tokens": total,
        f"{prefix}_max_batch_len": stats["max_len"],
        f"{prefix}_padding_share": (total - real) / total if total else 0.0,
        f"{prefix}_tokens_per_s": real / seconds if seconds > 0 else float("nan"),
        f"{prefix}_total_tokens_per_s": total / seconds if seconds > 0 else float("nan"),
    }
    if config is not None and prefix == "train":
        flops = bert_train_flops(config, total, stats["sum_b_s2"])
        out["train_flops_est"] = flops
        out["train_gflops_per_s_est"] = flops / seconds / 1e9 if seconds > 0 else float("nan")
    return out


class Timer:
    def __enter__(self):
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.t0
        return False


def _isolated_call(fn_module: str, fn_name: str, args, kwargs):
    import importlib

    fn = getattr(importlib.import_module(fn_module), fn_name)
    return fn(*args, **kwargs)


def run_isolated(fn: Callable, *args, **kwargs) -> dict:
    """Run a baseline in a fresh spawned process so peak_rss_mb belongs to that run only.
    ``fn`` must be a module-level function; arguments must be picklable."""
    import concurrent.futures
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=ctx) as ex:
        return ex.submit(_isolated_call, fn.__module__, fn.__name__, args, kwargs).result()
