"""The parts of ``Engine.fit``'s loop: the step plan, the micro-batch and optimizer step around
``optimisation.Optimisation``, the evaluation point (best weights, patience), logging, and the
save / stop decision. ``Engine.fit`` (core.py) is the spine that calls them in order.

Every rank calls the same parts at the same steps: the loss means, the stop agreement and the
checkpoint save are collectives under a multi-process launch.
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass, field

import torch

from bertkit.engine.batching import GroupedBatches, LengthGroupedBatches, shard_batches
from bertkit.engine.checkpoints import Progress
from bertkit.engine.gpu_attention import varying_shape_attention
from bertkit.engine.interrupts import TrainingInterrupted, test_signal
from bertkit.engine.progress import LineProgress
from bertkit.errors import BertkitError
from bertkit.networks.packed import SHAPE_BUCKET
from bertkit.networks.packed_heads import packs


@dataclass
class TrainReport:
    history: list = field(default_factory=list)  # one dict per evaluation: epoch, train_loss, metrics
    best_epoch: float | None = None
    best_metric: float | None = None
    train_seconds: float = 0.0
    examples: int = 0  # totals over all processes
    real_tokens: int = 0
    padded_tokens: int = 0
    token_pairs: int = 0  # sum of squared real lengths: attention's share of the FLOPs
    eval_seconds: float = 0.0
    optimizer_steps: int = 0
    stopped_early: bool = False
    best_step: int | None = None
    log: list = field(default_factory=list)  # history.jsonl lines (history.py)
    resumed_from: str | None = None  # the checkpoint this run continued from
    compile: dict = field(default_factory=dict)  # --compile: what was decided, when, the first step's time
    lazy_embeddings: bool = False  # what --lazy-embeddings (unset: where it applies) came to

    def throughput(self) -> dict:
        seconds = max(self.train_seconds, 1e-9)
        return {
            "train_seconds": round(self.train_seconds, 3),
            "examples": self.examples,
            "tokens": self.real_tokens,
            "examples_per_s": round(self.examples / seconds, 2),
            "tokens_per_s": round(self.real_tokens / seconds, 1),
            "padding_share": round(1 - self.real_tokens / max(self.padded_tokens, 1), 4),
            "token_pairs": self.token_pairs,
            "eval_seconds": round(self.eval_seconds, 3),
            "optimizer_steps": self.optimizer_steps,
            "compile": self.compile,
            "lazy_embeddings": self.lazy_embeddings,
        }


class StepPlan:
    """How long the run is, in this rank's batches and in optimizer steps. Every rank builds the
    same numbers from the same lengths and seed, so every rank steps, evaluates and saves together."""

    def __init__(self, lengths: list[int], config, world: int, rank: int, grouped: bool = True, groups=None):
        """``grouped`` False: plain shuffled batches (a mega-batch of one batch is just a batch).
        ``groups`` (group per feature, sampling, temperature): each batch from one group."""
        self.lengths, self.world, self.rank, self.accum = lengths, world, rank, config.grad_accum
        self.epochs, self.max_steps = config.epochs, config.max_steps
        self.sampler = LengthGroupedBatches(lengths, config.batch_size, config.seed, group=50 if grouped else 1)
        if groups is not None:
            self.sampler = GroupedBatches(groups[0], lengths, config.batch_size, config.seed, *groups[1:])
        self.per_rank = math.ceil(len(self.sampler) / world)  # the same on every rank (shard_batches)
        self.steps_per_epoch = math.ceil(self.per_rank / self.accum)
        # the epsilon keeps e.g. 0.1 x 30 steps (3.0000000000000004 in floats) at 3
        self.total_steps = config.max_steps or max(1, math.ceil(self.steps_per_epoch * config.epochs - 1e-9))
        full_epochs, rest_steps = divmod(self.total_steps, self.steps_per_epoch)
        self.total_batches = full_epochs * self.per_rank + min(rest_steps * self.accum, self.per_rank)

    @classmethod
    def of(cls, features: list[dict], config, accelerator, collate) -> "StepPlan":
        """The plan of ``features``: length-grouped batches, unless the collator says its batches
        must be random (``random_batches``: in-batch negatives, contrastive pairs) or the run asks
        for random ones (``--random-batches``), or that each batch holds one group's features
        (``batch_groups``: (feature key, sampling, temperature); a multi-head model's tasks,
        batching.GroupedBatches)."""
        grouped = not getattr(config, "random_batches", False) and not getattr(collate, "random_batches", False)
        lengths = [len(f["input_ids"]) for f in features]
        by = getattr(collate, "batch_groups", None)
        groups = None if by is None else ([f[by[0]] for f in features], *by[1:])
        return cls(lengths, config, accelerator.num_processes, accelerator.process_index, grouped, groups)

    def epochs_left(self, state: Progress) -> range:
        if state.step >= self.total_steps or state.stopped_early:  # a resumed run that had finished
            return range(0)
        return range(state.epoch, math.ceil(self.total_steps / self.steps_per_epoch))

    def shard(self, epoch: int) -> tuple[list[list[int]], bool]:
        """This rank's batches of ``epoch`` and whether the last one only repeats an example."""
        self.sampler.set_epoch(epoch)
        return shard_batches(list(self.sampler), self.lengths, self.world, self.rank)

    def batch_range(self, epoch: int, state: Progress, n: int) -> range:
        # a resumed epoch starts at the saved batch index: the plan is rebuilt, not replayed
        return range(state.next_batch if epoch == state.epoch else 0, n)

    def batches_done(self, state: Progress) -> int:
        return min(state.epoch * self.per_rank + state.next_batch, self.total_batches)

    def closes_step(self, i: int, n: int) -> bool:
        return (i + 1) % self.accum == 0 or i + 1 == n

    def window(self, i: int, n: int) -> int:
        """Batches in batch ``i``'s optimizer step: the loss is divided by it (short at an epoch's end)."""
        return min(self.accum, n - (i - i % self.accum))

    def position(self, epoch: int, done: int, n: int) -> tuple[float, float]:
        """Epochs of data seen (1.0 = one full pass), and that as recorded: capped at ``--epochs``
        and rounded, a whole number as an int."""
        seen = epoch + done / n
        at = round(seen if self.max_steps else min(seen, self.epochs), 4)
        return seen, int(at) if at == int(at) else at


class Selection:
    """The evaluation point: the mean training loss since the last one, the task's metrics, and a
    copy of the weights whenever ``main_metric`` is the best so far (highest, or lowest when
    ``greater_is_better`` is False); ``patience`` evaluations without one end the run."""

    def __init__(
        self,
        evaluate,
        main_metric: str | None,
        greater_is_better: bool,
        patience: int | None,
        best_weights: dict | None,
    ):
        self.evaluate, self.main_metric, self.greater_is_better = evaluate, main_metric, greater_is_better
        self.patience, self.best_weights = patience, best_weights

    def improves(self, score: float, best: float | None) -> bool:
        # strictly: a tie keeps the earlier weights
        return best is None or (score > best if self.greater_is_better else score < best)

    def record(self, model, state: Progress, train_loss: float, at, history, log, weights) -> None:
        """``log(values)``: the trackers' log, or None. ``weights()``: the weights to keep, on the CPU."""
        entry = {"epoch": at, "step": state.step, "train_loss": round(train_loss, 5)}
        if self.evaluate is not None:
            started = time.perf_counter()
            metrics = self.evaluate(model)  # identical on every rank, so every rank keeps the same best
            state.eval_seconds += time.perf_counter() - started
            entry["metrics"] = metrics
            history.eval(state.step, at, metrics)
            if log is not None:
                log({f"eval/{k}": v for k, v in metrics.items() if isinstance(v, (int, float))})
            score = metrics[self.main_metric]
            if self.improves(score, state.best_metric):
                state.best_metric, state.best_epoch, state.best_step, state.bad_evals = score, at, state.step, 0
                self.best_weights = weights()
            else:
                state.bad_evals += 1
        state.evals.append(entry)

    def out_of_patience(self, state: Progress) -> bool:
        return bool(self.patience) and state.bad_evals >= self.patience


class Run:
    """One call of ``Engine.fit`` between its setup and its result: what the steps share (position,
    running sums, timers, progress output, trackers) and the steps themselves."""

    def __init__(
        self,
        engine,
        model,
        config,
        plan: StepPlan,
        optimisation,
        kernels,
        state: Progress,
        history,
        sums,
        selection: Selection,
        checkpoints,
    ):
        self.acc, self.tracking, self.model, self.config, self.plan = (
            engine.accelerator,
            engine.tracking,
            model,
            config,
            plan,
        )
        (self.kernels, self.compiling), self.state, self.history = kernels, state, history  # kernels: (cpu, compiled)
        self.optimisation = optimisation
        self.sums, self.selection, self.checkpoints = sums, selection, checkpoints
        self.saving = checkpoints is not None and checkpoints.save_every is not None
        self.packed = packs(self.acc.unwrap_model(model))  # the padding share counts what the encoder ran
        self.finished, self.logging, self.at = False, False, 0
        self.started = 0.0  # when training time last started counting: evaluations and saves are left out
        self.step_loss, self.epoch_loss, self.ran = 0.0, 0.0, 0  # for the trackers and LineProgress's line
        self.progress = engine._progress(plan.total_batches, f"train from step {state.step}" if state.step else "train")
        self.lines = isinstance(self.progress, LineProgress)  # off a terminal: paced lines, one per epoch
        if self.lines:
            self.progress.resume_at(plan.batches_done(state))
            self.progress.set_position(state.step, plan.total_steps, state.step, self.mean_epoch_loss)
        else:
            self.progress.update(plan.batches_done(state))
        if self.tracking:
            from bertkit.engine.tracking import PROJECT, hyperparameters

            self.acc.init_trackers(PROJECT, config=hyperparameters(config.to_dict()))

    # --- timing ------------------------------------------------------------------------------------
    def start_clock(self) -> None:
        self.started = time.perf_counter()

    def stop_clock(self) -> None:
        self.state.train_seconds += time.perf_counter() - self.started

    # --- the loop's steps --------------------------------------------------------------------------
    def train_mode(self) -> None:
        self.model.train()
        self.kernels.apply()
        self.compiling.apply()
        self.start_clock()
        self.epoch_loss, self.ran = 0.0, 0

    def backward(self, batch: dict, sync: bool, window: int):
        """Forward and backward of one micro-batch; returns its (undivided) loss."""
        # non-blocking: a GPU need not finish the last step before this batch is queued
        batch = {k: v.to(self.acc.device, non_blocking=True) for k, v in batch.items()}
        # Between optimizer steps gradients stay local; the all-reduce runs on the last backward.
        with contextlib.nullcontext() if sync else self.acc.no_sync(self.model):
            with varying_shape_attention(self.acc.device):  # the backward keeps the kernel chosen here
                loss = self.model(**batch).loss
            self.acc.backward(loss / window)
        self.optimisation.accumulate(sync)
        return loss

    def count(self, loss, window: int, indices: list[int], repeated: bool) -> None:
        """Add a micro-batch to the running sums; ``repeated``: it only keeps a rank in step."""
        if self.tracking:
            self.step_loss += loss.item() / window
        lengths = [self.plan.lengths[j] for j in indices]
        computed = -(-sum(lengths) // SHAPE_BUCKET) * SHAPE_BUCKET if self.packed else None  # Packing.of's total
        self.sums.add(loss.detach(), lengths, new=not repeated, computed=computed)
        if self.lines:
            # summed in fp32 as RunningSums does: a bf16 sum drifts from the epoch's mean on stdout
            self.epoch_loss, self.ran = self.epoch_loss + loss.detach().float(), self.ran + 1
            self.progress.update(1, examples=0 if repeated else len(indices))
        else:
            self.progress.update(1)

    def mean_epoch_loss(self) -> float | None:
        """This epoch's mean training loss so far, for the paced progress line."""
        return float(self.epoch_loss) / self.ran if self.ran else None

    def optimizer_step(self, epoch: int, done: int, n: int) -> None:
        """Step after ``done`` of this epoch's ``n`` batches; then log it."""
        state = self.state
        self.logging = (state.step + 1) % self.config.log_every == 0
        grad_norm, lr = self.optimisation.step(want_norm=self.logging)
        state.step, state.epoch, state.next_batch = state.step + 1, epoch, done
        self.compiling.after_step(state.step, self.plan.total_steps)
        if self.lines:
            self.progress.at_step(state.step)
        test_signal("step", state.step)
        seen, self.at = self.plan.position(epoch, done, n)
        self.finished = state.step >= self.plan.total_steps
        if self.tracking:  # Accelerate logs on the main process only
            self.acc.log(
                {"train/loss": self.step_loss, "train/lr": self.optimisation.learning_rate, "train/epoch": seen},
                step=state.step,
            )
            self.step_loss = 0.0
        if self.logging:
            loss = self.finite(self.sums.mean_loss("log", self.acc))
            self.history.train(state.step, self.at, loss, lr, None if grad_norm is None else float(grad_norm))
            self.progress.set_postfix(epoch=f"{seen:.2f}", loss=f"{loss:.4f}")
        if self.lines and (done == n or self.finished):  # batches run in this process
            self.progress.line(f"epoch {epoch + 1}: {self.ran} batches, loss {float(self.epoch_loss) / self.ran:.4f}")

    def finite(self, loss: float) -> float:
        """The mean training loss, unless training diverged: a NaN or infinite loss would go on to
        save (and with --overwrite replace a good model by) weights full of NaN."""
        if not math.isfinite(loss):
            raise BertkitError(
                f"training diverged: the mean training loss was {loss} by step {self.state.step}",
                f"lower --lr (it is {self.config.lr:g}), look for extreme targets in the data, or try --precision no",
            )
        return loss

    def evaluation_due(self, epoch_done: bool) -> bool:
        every = self.config.eval_every
        return (self.state.step % every == 0 if every else epoch_done) or self.finished

    def evaluation_point(self) -> None:
        self.stop_clock()
        self.kernels.undo()
        self.compiling.undo()
        log = (lambda values: self.acc.log(values, step=self.state.step)) if self.tracking else None
        self.selection.record(
            self.model,
            self.state,
            self.finite(self.sums.mean_loss("eval", self.acc)),
            self.at,
            self.history,
            log,
            self.optimisation.weights,
        )
        if self.lines and self.state.evals and "metrics" in self.state.evals[-1]:
            metrics = self.state.evals[-1]["metrics"]
            shown = ", ".join(f"{k} {v:.4f}" for k, v in metrics.items() if isinstance(v, float))
            self.progress.line(f"evaluation at step {self.state.step} (epoch {self.at}): {shown}")
        if self.selection.out_of_patience(self.state):
            self.state.stopped_early = self.finished = True
        self.model.train()
        self.kernels.apply()
        self.compiling.apply()
        self.start_clock()

    def save_or_stop(self, stop) -> None:
        """Save every ``save_every`` steps, and before stopping on Ctrl-C / SIGTERM (``stop``,
        interrupts.StopRequests), which raises TrainingInterrupted once saved."""
        state, acc = self.state, self.acc
        due = self.saving and state.step % self.checkpoints.save_every == 0
        # A stop request needs an all-reduce with several processes: looked at on log steps only.
        stopping = not self.finished and (acc.num_processes == 1 or self.logging) and stop.agreed(acc)
        if not (due or stopping):
            return
        self.stop_clock()
        path = self.checkpoints.save(
            acc,
            state,
            self.sums.state(),
            self.optimisation.weights,
            self.optimisation.optimizer,
            self.optimisation.scheduler,
            self.selection.best_weights,
            self.history,
        )
        self.start_clock()
        if stopping:
            raise TrainingInterrupted(state.step, path)

    # --- the end -----------------------------------------------------------------------------------
    def close(self) -> None:
        """Whether training ended or failed: the model keeps no training kernels, output and
        trackers are closed."""
        self.kernels.undo()
        self.compiling.undo()
        self.progress.close()
        if self.tracking:
            self.acc.end_training()  # flushes and closes the event files

    def report(self) -> TrainReport:
        state, acc, checkpoints = self.state, self.acc, self.checkpoints
        totals = acc.reduce(torch.tensor(self.sums.counts, dtype=torch.long, device=acc.device), "sum").tolist()
        resumed_from = str(checkpoints.resume_from) if checkpoints and checkpoints.resume_from else None
        report = TrainReport(
            state.evals,
            state.best_epoch,
            state.best_metric,
            state.train_seconds,
            optimizer_steps=state.step,
            stopped_early=state.stopped_early,
            best_step=state.best_step,
            log=self.history.entries,
            resumed_from=resumed_from,
        )
        report.examples, report.real_tokens, report.padded_tokens, report.token_pairs = (int(x) for x in totals)
        report.eval_seconds = state.eval_seconds
        report.compile = dict(self.compiling.facts)
        report.lazy_embeddings = self.optimisation.lazy
        return report

    def best_model(self):
        """The trained bare fp32 model with the best evaluation's weights (unless that was the last)."""
        model = self.optimisation.trained_model()
        if self.selection.best_weights is not None and self.state.best_step != self.state.evals[-1]["step"]:
            model.load_state_dict(self.selection.best_weights)
        return model
