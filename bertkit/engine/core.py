"""The training and inference engine: the only module that imports Accelerate.

It knows nothing about tasks: it gets feature dicts, a model and a few callbacks, and gives back
numbers (``fit``) or per-feature numpy outputs in feature order (``infer``). The same code runs on
CPU, one GPU, several GPUs or several CPU processes under ``accelerate launch`` / ``torchrun``.

With several processes every rank builds the same batch plan (same lengths, same seed) and takes
its own share of it (``batching.shard_batches``, ``batches[rank::world]``); Accelerate's data
loader sharding is not used, because with batches of unequal size it skips a training round whose
last batch is short and gives ranks different inference batch sizes, which breaks its gathers.
"""

from __future__ import annotations

import contextlib
import math
import sys
import time
from dataclasses import dataclass, field

import numpy as np
import torch
from accelerate import Accelerator
from accelerate.state import AcceleratorState, PartialState
from accelerate.utils import GradientAccumulationPlugin, get_int_from_env, is_torch_xla_available, set_seed
from tqdm.auto import tqdm

from bertkit.engine.batching import Collator, LengthGroupedBatches, shard_batches, sorted_batches
from bertkit.config import TrainConfig
from bertkit.engine.cpu_kernels import CpuTrainingKernels
from bertkit.errors import BertkitError
from bertkit.engine.history import History
from bertkit.engine.interrupts import StopRequests, TrainingInterrupted, test_signal
from bertkit.engine.master_weights import MasterWeights
from bertkit.engine.precision import describe, resolve
from bertkit.engine.threads import configure as configure_threads
from bertkit.engine.checkpoints import Progress, RunningSums, cpu_copy, set_rng_state

NO_DECAY = ("bias", "LayerNorm.weight", "layer_norm.weight", "norm.weight")
MODEL_INPUTS = ("input_ids", "token_type_ids", "attention_mask")
WORLD_SIZE_ENV = ("WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE")


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

    def throughput(self) -> dict:
        seconds = max(self.train_seconds, 1e-9)
        return {"train_seconds": round(self.train_seconds, 3), "examples": self.examples, "tokens": self.real_tokens,
                "examples_per_s": round(self.examples / seconds, 2),
                "tokens_per_s": round(self.real_tokens / seconds, 1),
                "padding_share": round(1 - self.real_tokens / max(self.padded_tokens, 1), 4),
                "token_pairs": self.token_pairs, "eval_seconds": round(self.eval_seconds, 3),
                "optimizer_steps": self.optimizer_steps}


class Engine:
    def __init__(self, precision: str = "auto", seed: int = 42, trackers: list | None = None,
                 logging_dir: str | None = None, threads: int | None = None):
        """``trackers``: Accelerate tracker names (bertkit.engine.tracking), logging under ``logging_dir``.
        ``precision`` auto becomes bf16 or no for this process's device (``self.precision``, with
        ``self.precision_reason``)."""
        if precision == "fp16" and not torch.cuda.is_available():
            raise BertkitError("--precision fp16 needs a GPU", "use --precision bf16 or no on CPU")
        cpu = _launched_on_cpu()
        self.precision, self.precision_reason = resolve(precision, PartialState(cpu=cpu).device.type)
        # bf16 runs with bf16 weights (master_weights.MasterWeights), not Accelerate's autocast
        mixed = "no" if self.precision == "bf16" else self.precision
        _release_other_precision(mixed)
        # fit() accumulates --grad-accum itself; Accelerate's own count (which a launcher config can
        # set) stays 1 so that it never divides the loss a second time.
        self.accelerator = Accelerator(mixed_precision=mixed, cpu=cpu,
                                       gradient_accumulation_plugin=GradientAccumulationPlugin(num_steps=1),
                                       log_with=trackers or None, project_dir=logging_dir)
        self.tracking = bool(trackers)
        self.threads = configure_threads(threads)  # after Accelerate, which may set its own count
        self.seed = seed
        set_seed(seed)
        if not self.accelerator.is_main_process:
            _quiet_libraries()

    def runtime(self, requested: str) -> dict:
        """What ran, for the console and bertkit.json: precision (and why), threads."""
        return {"precision": self.precision, "precision_name": describe(self.precision),
                "precision_requested": requested, "precision_reason": self.precision_reason,
                "threads": self.threads["threads"], "threads_source": self.threads["source"],
                **({"notice": self.threads["notice"]} if "notice" in self.threads else {})}

    @property
    def is_main_process(self) -> bool:
        return self.accelerator.is_main_process

    quiet = False  # no progress output at all (the server predicts on every request)
    _fitting = False

    def _progress(self, total: int, description: str):
        if self.quiet or not self.accelerator.is_main_process:
            return tqdm(total=total, disable=True)
        if not sys.stderr.isatty():  # CI logs and files: a line per epoch / evaluation, no \r redraws
            # only while training: a lone eval or predict keeps stderr for notices and errors
            return LineProgress(total, description) if self._fitting else tqdm(total=total, disable=True)
        return tqdm(total=total, desc=description, unit="batch", leave=False, file=sys.stderr, dynamic_ncols=True)

    def prepare_model(self, model):
        """For inference: bf16 casts the weights once instead of autocasting every forward."""
        if self.precision == "bf16":
            model.to(torch.bfloat16)
        return self.accelerator.prepare_model(model, evaluation_mode=True)

    def autocast(self):
        if self.precision == "bf16":  # a no-op for a bf16 model; casts an fp32 model's matmuls
            return torch.autocast(self.accelerator.device.type, dtype=torch.bfloat16)
        return self.accelerator.autocast()

    def unwrap(self, model):
        return self.accelerator.unwrap_model(model)

    # --- training -----------------------------------------------------------------------------
    def fit(self, model, features: list[dict], config: TrainConfig, pad_token_id: int,
            evaluate=None, main_metric: str | None = None, collate_fn=None,
            checkpoints=None) -> tuple[object, TrainReport]:
        """Train with AdamW, linear warmup/decay, clipping; evaluate after each epoch (or every
        ``config.eval_every`` steps) and keep the best weights by ``main_metric``.
        ``evaluate(model) -> dict`` is the task's evaluation. ``collate_fn`` replaces the padding
        collator (masked-LM batches are masked there). ``checkpoints``
        (``training_state.Checkpoints``) saves the full state every ``config.save_every`` steps and,
        when it holds one, continues from a saved state exactly where it stopped."""
        from transformers import get_linear_schedule_with_warmup

        acc, accum = self.accelerator, config.grad_accum
        # seed + rank: each process draws its own dropout masks (DDP copies rank 0's weights anyway)
        set_seed(self.seed, device_specific=True)
        lengths = [len(f["input_ids"]) for f in features]
        sampler = LengthGroupedBatches(lengths, config.batch_size, config.seed)
        per_rank = math.ceil(len(sampler) / acc.num_processes)  # the same on every rank (shard_batches)
        steps_per_epoch = math.ceil(per_rank / accum)
        # the epsilon keeps e.g. 0.1 x 30 steps (3.0000000000000004 in floats) at 3
        total_steps = config.max_steps or max(1, math.ceil(steps_per_epoch * config.epochs - 1e-9))
        full_epochs, rest_steps = divmod(total_steps, steps_per_epoch)
        total_batches = full_epochs * per_rank + min(rest_steps * accum, per_rank)
        if checkpoints is not None:  # the saved fp32 weights go in before bf16 master weights copy them
            checkpoints.load_weights(model)
        groups = parameter_groups(model, config.weight_decay)
        master = None
        if self.precision == "bf16":  # sparse embedding gradients: DDP all-reduces dense ones only
            master = MasterWeights(model.to(acc.device), groups, sparse_embeddings=acc.num_processes == 1)
            groups = master.groups
        kernels = CpuTrainingKernels(acc.unwrap_model(model), enabled=acc.device.type == "cpu")
        # The fused kernel (CPU and CUDA) does one pass over the parameters instead of several.
        optimizer = torch.optim.AdamW(groups, lr=config.lr, fused=True)
        # Not prepared: Accelerate's scheduler wrapper steps once per process, for its own sharding.
        scheduler = get_linear_schedule_with_warmup(optimizer, int(config.warmup_ratio * total_steps), total_steps)
        state, history, best_state, saved = Progress(), History(), None, None
        if checkpoints is not None:  # the optimizer's state goes in before it is prepared
            state, history, best_state, saved = checkpoints.begin(acc, optimizer, scheduler)
        model, optimizer = acc.prepare(model, optimizer)
        collate = collate_fn or Collator(pad_token_id)
        saving = checkpoints is not None and checkpoints.save_every is not None
        sums = RunningSums(acc.device, saved)

        def weights() -> dict:  # on the CPU in fp32: a bf16 run's trained weights are its masters
            unwrapped = acc.unwrap_model(model)
            return master.state_dict(unwrapped) if master else cpu_copy(unwrapped)

        self._fitting = True
        progress = self._progress(total_batches, f"train from step {state.step}" if state.step else "train")
        progress.update(min(state.epoch * per_rank + state.next_batch, total_batches))
        lines = isinstance(progress, LineProgress)  # off a terminal: one line per epoch
        if self.tracking:
            from bertkit.engine.tracking import PROJECT, hyperparameters

            acc.init_trackers(PROJECT, config=hyperparameters(config.to_dict()))
        if saved is not None:
            set_rng_state(saved["rng"])  # last: nothing after this may draw random numbers
        step_loss = 0.0
        finished = state.step >= total_steps or state.stopped_early
        try:
            with StopRequests(saving) as stop:
                for epoch in range(state.epoch, math.ceil(total_steps / steps_per_epoch)):
                    if finished:
                        break
                    sampler.set_epoch(epoch)
                    batches, last_repeats = shard_batches(list(sampler), lengths, acc.num_processes,
                                                          acc.process_index)
                    model.train()
                    kernels.apply()
                    started, epoch_loss, ran = time.perf_counter(), 0.0, 0  # for LineProgress's line
                    # a resumed epoch starts at the saved batch index: the plan is rebuilt, not replayed
                    for i in range(state.next_batch if epoch == state.epoch else 0, len(batches)):
                        indices = batches[i]
                        window = min(accum, len(batches) - (i - i % accum))  # batches in this optimizer step
                        sync = (i + 1) % accum == 0 or i + 1 == len(batches)
                        batch = {k: v.to(acc.device) for k, v in collate([features[j] for j in indices]).items()}
                        # Between optimizer steps gradients stay local; the all-reduce runs on the last backward.
                        with contextlib.nullcontext() if sync else acc.no_sync(model):
                            loss = model(**batch).loss
                            acc.backward(loss / window)
                        # fp32 accumulation; with several processes only at sync, after DDP's all-reduce
                        if master is not None and (sync or acc.num_processes == 1):
                            master.accumulate()
                        if self.tracking:
                            step_loss += loss.item() / window
                        repeat = last_repeats and i + 1 == len(batches)
                        sums.add(loss.detach(), [lengths[j] for j in indices], new=not repeat)
                        progress.update(1)
                        if lines:
                            epoch_loss, ran = epoch_loss + loss.detach(), ran + 1
                        if not sync:
                            continue
                        logging = (state.step + 1) % config.log_every == 0
                        grad_norm = None
                        if config.max_grad_norm > 0 and master is not None:
                            grad_norm = master.clip_(config.max_grad_norm)
                        elif config.max_grad_norm > 0:
                            grad_norm = acc.clip_grad_norm_(model.parameters(), config.max_grad_norm)
                        elif logging and master is not None:
                            grad_norm = master.grad_norm()
                        elif logging:
                            acc.unscale_gradients()
                            grad_norm = torch.nn.utils.get_total_norm([p.grad for p in model.parameters()
                                                                       if p.grad is not None])
                        lr = scheduler.get_last_lr()[0]  # the rate this step uses
                        optimizer.step()
                        if master is not None:
                            master.publish()
                        if not optimizer.step_was_skipped:  # an fp16 overflow skips the step
                            scheduler.step()
                        optimizer.zero_grad(set_to_none=True)
                        state.step, state.epoch, state.next_batch = state.step + 1, epoch, i + 1
                        test_signal("step", state.step)
                        seen = epoch + (i + 1) / len(batches)  # epochs of data seen, 1.0 = one full pass
                        if self.tracking:  # Accelerate logs on the main process only
                            acc.log({"train/loss": step_loss, "train/lr": scheduler.get_last_lr()[0],
                                     "train/epoch": seen}, step=state.step)
                            step_loss = 0.0
                        at = round(seen if config.max_steps else min(seen, config.epochs), 4)
                        at = int(at) if at == int(at) else at
                        finished = state.step >= total_steps
                        if logging:
                            loss_now = sums.mean_loss("log", acc)
                            history.train(state.step, at, loss_now, lr, None if grad_norm is None else float(grad_norm))
                            progress.set_postfix(epoch=f"{seen:.2f}", loss=f"{loss_now:.4f}")
                        if lines and (i + 1 == len(batches) or finished):  # batches run in this process
                            progress.line(f"epoch {epoch + 1}: {ran} batches, loss {float(epoch_loss) / ran:.4f}")
                        due = state.step % config.eval_every == 0 if config.eval_every else i + 1 == len(batches)
                        if due or finished:
                            state.train_seconds += time.perf_counter() - started
                            kernels.undo()
                            best_state = self._evaluation_point(model, state, sums, at, evaluate, main_metric,
                                                                history, best_state, weights)
                            if config.patience and state.bad_evals >= config.patience:
                                state.stopped_early = finished = True
                            model.train()
                            kernels.apply()
                            started = time.perf_counter()
                        due = saving and state.step % checkpoints.save_every == 0
                        # A stop request needs an all-reduce with several processes: looked at on log steps only.
                        stopping = not finished and (acc.num_processes == 1 or logging) and stop.agreed(acc)
                        if due or stopping:
                            state.train_seconds += time.perf_counter() - started
                            path = checkpoints.save(acc, state, sums.state(), weights, optimizer, scheduler,
                                                    best_state, history)
                            started = time.perf_counter()
                            if stopping:
                                raise TrainingInterrupted(state.step, path)
                        if finished:
                            break
                    state.train_seconds += time.perf_counter() - started
        finally:
            kernels.undo()
            progress.close()
            self._fitting = False
            if self.tracking:
                acc.end_training()  # flushes and closes the event files
        totals = acc.reduce(torch.tensor(sums.counts, dtype=torch.long, device=acc.device), "sum").tolist()
        report = TrainReport(state.evals, state.best_epoch, state.best_metric, state.train_seconds,
                             optimizer_steps=state.step, stopped_early=state.stopped_early, best_step=state.best_step,
                             log=history.entries, resumed_from=str(checkpoints.resume_from) if checkpoints and
                             checkpoints.resume_from else None)
        report.examples, report.real_tokens, report.padded_tokens, report.token_pairs = (int(x) for x in totals)
        report.eval_seconds = state.eval_seconds
        model = acc.unwrap_model(model)
        if master is not None:
            master.to_fp32(model)  # the fp32 masters are the trained weights
        if best_state is not None and state.best_step != state.evals[-1]["step"]:
            model.load_state_dict(best_state)
        return model, report

    def _evaluation_point(self, model, state, sums, at, evaluate, main_metric, history, best_state, weights):
        """Record the mean training loss since the last evaluation and, with an ``evaluate``, the
        metrics; keep a copy of the weights when they are the best so far."""
        acc = self.accelerator
        entry = {"epoch": at, "step": state.step, "train_loss": round(sums.mean_loss("eval", acc), 5)}
        if evaluate is not None:
            started = time.perf_counter()
            metrics = evaluate(model)  # identical on every rank, so every rank keeps the same best
            state.eval_seconds += time.perf_counter() - started
            entry["metrics"] = metrics
            history.eval(state.step, at, metrics)
            if self.tracking:
                acc.log({f"eval/{k}": v for k, v in metrics.items() if isinstance(v, (int, float))}, step=state.step)
            score = metrics[main_metric]
            if state.best_metric is None or score > state.best_metric:
                state.best_metric, state.best_epoch, state.best_step, state.bad_evals = score, at, state.step, 0
                best_state = weights()
            else:
                state.bad_evals += 1
        state.evals.append(entry)
        return best_state

    # --- inference ----------------------------------------------------------------------------
    def infer(self, model, features: list[dict], batch_size: int, output_names: tuple, per_token: bool,
              pad_token_id: int, description: str = "predict") -> dict:
        """Model outputs for every feature, in feature order: ``{name: [np.ndarray per feature]}``.
        Per-token outputs are trimmed to each feature's own length.

        Rank r runs the length-sorted batches r, r + world, ...: the very batches of a single
        process, so the numbers are the same, and each feature is computed exactly once."""
        acc, world = self.accelerator, self.accelerator.num_processes
        lengths = [len(f["input_ids"]) for f in features]
        plan = sorted_batches(lengths, batch_size)
        if not plan:
            return {name: [] for name in output_names}
        shards = [plan[r::world] for r in range(world)]
        mine = shards[acc.process_index]
        # The bare module: DDP would broadcast buffers in forward, a collective that ranks with
        # different numbers of batches cannot pair up.
        network = acc.unwrap_model(model)
        network.eval()
        collate = Collator(pad_token_id)
        local = {name: [] for name in output_names}  # rows: features, or tokens when per_token
        progress = self._progress(len(mine), description)
        with torch.inference_mode(), self.autocast():
            # A rank without a batch (fewer batches than ranks) runs one feature to learn the shapes.
            for indices in mine or [plan[0][:1]]:
                batch = collate([features[j] for j in indices])
                outputs = network(**{k: v.to(acc.device) for k, v in batch.items() if k in MODEL_INPUTS})
                for name in output_names:
                    values = outputs[name].float().cpu()
                    if not mine:
                        values = values[:0, 0] if per_token else values[:0]
                    elif per_token:
                        values = torch.cat([values[row, :lengths[j]] for row, j in enumerate(indices)])
                    local[name].append(values)
                progress.update(1 if mine else 0)
        progress.close()

        order = [j for shard in shards for batch in shard for j in batch]  # the gathered row order
        rows = [sum(lengths[j] if per_token else 1 for batch in shard for j in batch) for shard in shards]
        results = {}
        for name in output_names:
            values = torch.cat(local[name])
            if world > 1:
                values = self._gather_rows(values, rows)
            values = values.numpy()
            if per_token:
                pieces = np.split(values, np.cumsum([lengths[j] for j in order])[:-1])
            else:
                pieces = list(values)
            by_feature = [None] * len(features)
            for j, piece in zip(order, pieces):
                by_feature[j] = piece
            results[name] = by_feature
        return results

    def _gather_rows(self, values: torch.Tensor, rows: list[int]) -> torch.Tensor:
        """Every rank's rows, rank 0's first. Each rank knows every rank's row count from the shared
        plan, so one padded all-gather suffices."""
        longest = max(rows)
        padded = torch.zeros((longest, *values.shape[1:]), dtype=values.dtype)
        padded[:len(values)] = values
        gathered = self.accelerator.gather(padded.to(self.accelerator.device)).cpu()
        return torch.cat([gathered[r * longest:r * longest + n] for r, n in enumerate(rows)])


class LineProgress:
    """tqdm's interface for output that is not a terminal: no redraws, one line per ``line()``
    call (an epoch) and one when an evaluation pass closes."""

    def __init__(self, total: int, description: str):
        self.total, self.description, self.done, self.started = total, description, 0, time.perf_counter()
        self.lines = 0

    def update(self, n: int = 1) -> None:
        self.done += n

    def set_postfix(self, **_values) -> None:
        pass

    def line(self, text: str) -> None:
        self.lines += 1
        print(f"{self.description}: {text} ({self.done}/{self.total} batches, "
              f"{time.perf_counter() - self.started:.1f}s)", file=sys.stderr, flush=True)

    def close(self) -> None:
        if not self.lines and self.description == "eval":  # predict output stays quiet
            self.line("done")


def _launched_on_cpu() -> bool:
    """Several processes (torchrun, mpirun) on a machine without an accelerator: Accelerate uses
    gloo only when told ``cpu=True``; otherwise each process silently runs alone as rank 0 of 1."""
    world = get_int_from_env(list(WORLD_SIZE_ENV), 1)
    return world > 1 and not torch.accelerator.is_available() and not is_torch_xla_available()


def _release_other_precision(precision: str) -> None:
    """Accelerate keeps one process-wide state and refuses an Accelerator of another precision.
    Dropping it (the process group lives in PartialState and stays) lets engines of different
    precisions follow each other, e.g. bf16 fine-tuning then fp32 predict in one process; the
    newest engine owns the state."""
    shared = AcceleratorState._shared_state
    if shared and shared.get("_mixed_precision") not in (None, precision):
        AcceleratorState._reset_state(reset_partial_state=False)


def _quiet_libraries() -> None:
    """Ranks other than the main one print nothing: load reports, warnings, progress bars."""
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()


def parameter_groups(model, weight_decay: float) -> list[dict]:
    decay, no_decay = [], []
    for name, parameter in model.named_parameters():
        if parameter.requires_grad:
            (no_decay if name.endswith(NO_DECAY) else decay).append(parameter)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
