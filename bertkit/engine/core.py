"""The training and inference engine: the only module that imports Accelerate.

It knows nothing about tasks or options: it gets feature dicts, a model, a few callbacks and the
run's ``TrainConfig`` (bertkit.options, a value it only reads), and gives back
numbers (``fit``) or per-feature numpy outputs in feature order (``infer``). The same code runs on
CPU, one GPU, several GPUs or several CPU processes under ``accelerate launch`` / ``torchrun``.

With several processes every rank builds the same batch plan (same lengths, same seed) and takes
its own share of it (``batching.shard_batches``, ``batches[rank::world]``); Accelerate's data
loader sharding is not used, because with batches of unequal size it skips a training round whose
last batch is short and gives ranks different inference batch sizes, which breaks its gathers.
"""

from __future__ import annotations

import atexit
from contextlib import contextmanager

import numpy as np
import torch
from accelerate import Accelerator
from accelerate.state import AcceleratorState, PartialState
from accelerate.utils import (
    DistributedDataParallelKwargs,
    GradientAccumulationPlugin,
    get_int_from_env,
    is_torch_xla_available,
    parse_flag_from_env,
    set_seed,
)

from bertkit.engine.batching import sorted_batches
from bertkit.engine.checkpoints import Progress, RunningSums
from bertkit.engine.compilation import compiled_layers
from bertkit.engine.gpu_attention import varying_shape_attention
from bertkit.engine.history import History
from bertkit.engine.interrupts import StopRequests
from bertkit.engine.optimisation import Optimisation, parameter_groups  # noqa: F401 (bertkit.engine's name)
from bertkit.engine.packed_inference import PackedInference
from bertkit.engine.precision import describe, resolve
from bertkit.engine.progress import LineProgress, batch_done, pace_seconds, progress_bar
from bertkit.engine.rng_state import set_rng_state
from bertkit.engine.runtime_text import say_runtime
from bertkit.engine.threads import configure as configure_threads
from bertkit.engine.training import Run, Selection, StepPlan, TrainReport
from bertkit.engine.varlen_attention import training_kernels
from bertkit.errors import BertkitError
from bertkit.events import notice
from bertkit.networks.collate import Collator
from bertkit.networks.losses import evaluation_loss
from bertkit.tasks.family_recipes import with_family_recipe

MODEL_INPUTS = ("input_ids", "token_type_ids", "attention_mask")
WORLD_SIZE_ENV = ("WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE")


class Engine:
    # Prediction batches that are mostly padding run packed (engine/packed_inference.py): `serve` turns
    # it on for its arrival-order batches; predict, eval and select keep the padded numbers they share.
    pack_padded = False

    def __init__(
        self,
        precision: str = "auto",
        seed: int = 42,
        trackers: list | None = None,
        logging_dir: str | None = None,
        threads: int | None = None,
        idle_weights: bool = False,
    ):
        """``trackers``: Accelerate tracker names (bertkit.engine.tracking), logging under ``logging_dir``.
        ``idle_weights``: a step may leave some weights without a gradient (a multi-head model's
        other heads), which DDP must be told about when several processes train.
        ``precision`` auto becomes bf16 or no for this process's device (``self.precision``, with
        ``self.precision_reason``)."""
        if precision == "fp16" and not torch.cuda.is_available():
            raise BertkitError("--precision fp16 needs a GPU", "use --precision bf16 or no on CPU")
        pace_seconds()  # a bad BERTKIT_PROGRESS_SECONDS fails now, not when the first line is due
        cpu = _launched_on_cpu()
        self.precision, self.precision_reason = resolve(precision, PartialState(cpu=cpu).device.type)
        # bf16 runs with bf16 weights (master_weights.MasterWeights), not Accelerate's autocast
        mixed = "no" if self.precision == "bf16" else self.precision
        _release_other_precision(mixed)
        # fit() accumulates --grad-accum itself; Accelerate's own count (which a launcher config can
        # set) stays 1 so that it never divides the loss a second time.
        self.accelerator = Accelerator(
            mixed_precision=mixed,
            cpu=cpu,
            gradient_accumulation_plugin=GradientAccumulationPlugin(num_steps=1),
            log_with=trackers or None,
            project_dir=logging_dir,
            # with several processes, DDP finds each step's unused weights (the other heads) and
            # leaves a weight unused on every rank without a gradient, as one process does
            kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=True)] if idle_weights else None,
        )
        self.tracking = bool(trackers)
        self.threads = configure_threads(threads)  # after Accelerate, which may set its own count
        self.seed, self.requested = seed, precision
        if self.accelerator.is_main_process:  # said now: a user can stop and rerun with --threads
            say_runtime(self.runtime(precision))
        set_seed(seed)
        if self.accelerator.num_processes > 1:
            _end_process_group_at_exit()
        if not self.accelerator.is_main_process:
            _quiet_libraries()

    def runtime(self, requested: str) -> dict:
        """What ran, for the console and bertkit.json: precision (and why), threads."""
        return {
            "precision": self.precision,
            "precision_name": describe(self.precision),
            "precision_requested": requested,
            "precision_reason": self.precision_reason,
            "threads": self.threads["threads"],
            "threads_source": self.threads["source"],
            **({"notice": self.threads["notice"]} if "notice" in self.threads else {}),
        }

    @property
    def is_main_process(self) -> bool:
        return self.accelerator.is_main_process

    quiet = False  # no progress output at all (the server predicts on every request)
    _fitting = False

    def _progress(self, total: int, description: str):
        return progress_bar(
            total, description, show=not self.quiet and self.accelerator.is_main_process, fitting=self._fitting
        )

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
    def fit(
        self,
        model,
        features: list[dict],
        config,
        pad_token_id: int,
        evaluate=None,
        main_metric: str | None = None,
        collate_fn=None,
        checkpoints=None,
        targets: dict | None = None,
        greater_is_better: bool = True,
    ) -> tuple[object, TrainReport]:
        """Train with AdamW, linear warmup/decay, clipping; evaluate after each epoch (or every
        ``config.eval_every`` steps) and keep the best weights by ``main_metric`` (the highest, or
        the lowest with ``greater_is_better=False``). ``evaluate(model) -> dict`` is the task's
        evaluation. ``targets`` (``{feature key: kind}``, batching.Collator) says how the default
        collator makes tensors of the training targets; ``collate_fn`` replaces that collator
        (masked-LM batches are masked there). ``checkpoints`` (checkpoints.Checkpoints) saves the
        full state every ``config.save_every`` steps and, when it holds one, continues from a
        saved state exactly where it stopped."""
        # long: the loop itself, read top to bottom; each of its steps is one of Run's methods (training.py)
        acc, config = self.accelerator, with_family_recipe(config, getattr(model, "config", None))[0]
        # seed + rank: each process draws its own dropout masks (DDP copies rank 0's weights anyway)
        set_seed(self.seed, device_specific=True)
        collate = collate_fn or Collator(pad_token_id, targets)
        plan = StepPlan.of(features, config, acc, collate)
        if checkpoints is not None:  # the saved fp32 weights go in before bf16 master weights copy them
            checkpoints.load_weights(model)
        optimisation = Optimisation(model, config, plan.total_steps, acc, bf16=self.precision == "bf16")
        if optimisation.lazy:  # on by default where it applies: a run whose output is a file says so too
            say("lazy embeddings: AdamW steps only the embedding rows a batch uses (--no-lazy: all rows)")
        kernels = training_kernels(acc.unwrap_model(model), acc.device.type, getattr(config, "packing", "auto"))
        compiling = compiled_layers(kernels.model, config, acc.num_processes, acc.device.type, self.precision, say)
        state, history, best_weights, saved = Progress(), History(), None, None
        if checkpoints is not None:  # the optimizer's state goes in before it is prepared
            state, history, best_weights, saved = checkpoints.begin(
                acc, optimisation.optimizer, optimisation.scheduler, greater_is_better=greater_is_better
            )
        model = optimisation.prepare(model)
        # a collator that draws (masked LM) names its generators: checkpoints save and restore them
        generators = getattr(collate, "generators", {})
        selection = Selection(evaluate, main_metric, greater_is_better, config.patience, best_weights)
        notice("start", "", work="train")  # checkpoints fit: the work begins, what was decided is shown
        self._fitting = True
        run = Run(
            self,
            model,
            config,
            plan,
            optimisation,
            (kernels, compiling),
            state,
            history,
            RunningSums(acc.device, saved, generators),
            selection,
            checkpoints,
        )
        if saved is not None:
            set_rng_state(saved["rng"], generators)  # last: nothing after this may draw random numbers
        try:
            with StopRequests(run.saving) as stop, _unused_checkpoints_go(checkpoints, self.is_main_process):
                for epoch in plan.epochs_left(state):
                    batches, repeats_last = plan.shard(epoch)
                    run.train_mode()
                    for i in plan.batch_range(epoch, state, len(batches)):
                        sync, window = plan.closes_step(i, len(batches)), plan.window(i, len(batches))
                        loss = run.backward(collate([features[j] for j in batches[i]]), sync, window)
                        run.count(loss, window, batches[i], repeated=repeats_last and i + 1 == len(batches))
                        if not sync:
                            continue
                        run.optimizer_step(epoch, i + 1, len(batches))
                        if run.evaluation_due(epoch_done=i + 1 == len(batches)):
                            run.evaluation_point()
                        run.save_or_stop(stop)
                        if run.finished:
                            break
                    run.stop_clock()
                    if run.finished:
                        break
        finally:
            run.close()
            self._fitting = False
        report = run.report()
        return run.best_model(), report

    # --- inference ----------------------------------------------------------------------------
    def infer(
        self,
        model,
        features: list[dict],
        batch_size: int,
        output_names: tuple,
        per_token: bool,
        pad_token_id: int,
        description: str = "predict",
        targets: dict | None = None,
    ) -> dict:
        """Model outputs for every feature, in feature order: ``{name: [np.ndarray per feature]}``.
        Per-token outputs are trimmed to each feature's own length. ``targets`` (the task's, see
        ``Collator``), when every feature carries them: also ``"loss"``, the plain loss averaged over
        features (networks.losses.evaluation_loss; each batch's mean weighted by its rows, as the HF
        Trainer's eval_loss).

        Rank r runs the length-sorted batches r, r + world, ...: the very batches of a single
        process, so the numbers are the same, and each feature is computed exactly once."""
        acc, world = self.accelerator, self.accelerator.num_processes
        notice("start", "", work=description)
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
        targets = targets if targets and all(key in f for f in features for key in targets) else {}
        collate = Collator(pad_token_id, targets or None)
        packed = PackedInference(network, acc.device, enabled=self.pack_padded and not targets)
        local = {name: [] for name in output_names}  # rows: features, or tokens when per_token
        loss = torch.zeros(2, dtype=torch.float64, device=acc.device)  # sum of batch losses x rows, rows
        progress = self._progress(len(mine), description)
        paced = isinstance(progress, LineProgress)  # off a terminal: it also counts examples
        with torch.inference_mode(), self.autocast(), varying_shape_attention(acc.device):
            # A rank without a batch (fewer batches than ranks) runs one feature to learn the shapes.
            for indices in mine or [plan[0][:1]]:
                batch = collate([features[j] for j in indices])
                outputs = packed.run(network, {k: v.to(acc.device) for k, v in batch.items() if k in MODEL_INPUTS})
                if targets and mine:
                    read = (*targets, "attention_mask")  # QA's loss leaves the padding out
                    batch_loss = evaluation_loss(outputs, {k: batch[k].to(acc.device) for k in read}, targets)
                    loss[0] += batch_loss.double() * len(indices)
                    loss[1] += len(indices)
                for name in output_names:
                    values = outputs[name].float().cpu()
                    if not mine:
                        values = values[:0, 0] if per_token else values[:0]
                    elif per_token:
                        values = torch.cat([values[row, : lengths[j]] for row, j in enumerate(indices)])
                    local[name].append(values)
                if mine and paced:
                    progress.update(1, examples=len(indices))
                elif mine:
                    progress.update(1)
                batch_done(len(indices) if mine else 0)
        progress.close()
        results = self._in_feature_order(local, shards, lengths, per_token, len(features))
        if targets:
            loss = acc.reduce(loss, "sum") if world > 1 else loss
            results["loss"] = float(loss[0] / loss[1]) if loss[1] else None
        return results

    def _in_feature_order(self, local: dict, shards: list, lengths: list[int], per_token: bool, count: int) -> dict:
        """Every rank's outputs, gathered and put back in feature order: ``{name: [array per feature]}``."""
        order = [j for shard in shards for batch in shard for j in batch]  # the gathered row order
        rows = [sum(lengths[j] if per_token else 1 for batch in shard for j in batch) for shard in shards]
        results = {}
        for name, parts in local.items():
            values = torch.cat(parts)
            if len(shards) > 1:
                values = self._gather_rows(values, rows)
            values = values.numpy()
            pieces = np.split(values, np.cumsum([lengths[j] for j in order])[:-1]) if per_token else list(values)
            by_feature = [None] * count
            for j, piece in zip(order, pieces):
                by_feature[j] = piece
            results[name] = by_feature
        return results

    def _gather_rows(self, values: torch.Tensor, rows: list[int]) -> torch.Tensor:
        """Every rank's rows, rank 0's first. Each rank knows every rank's row count from the shared
        plan, so one padded all-gather suffices."""
        longest = max(rows)
        padded = torch.zeros((longest, *values.shape[1:]), dtype=values.dtype)
        padded[: len(values)] = values
        gathered = self.accelerator.gather(padded.to(self.accelerator.device)).cpu()
        return torch.cat([gathered[r * longest : r * longest + n] for r, n in enumerate(rows)])


def say(line: str) -> None:
    """A runtime line (the training's settings as they apply), to every listener."""
    notice("runtime", line)


def _launched_on_cpu() -> bool:
    """Several processes (torchrun, mpirun) on a machine without an accelerator: Accelerate uses
    gloo only when told ``cpu=True``; otherwise each process silently runs alone as rank 0 of 1."""
    if parse_flag_from_env("ACCELERATE_USE_CPU"):  # asked for (accelerate launch --cpu): a GPU beside stays unused
        return True  # (Accelerate's own helpers read the flag too, and refuse a state made on the GPU)
    world = get_int_from_env(list(WORLD_SIZE_ENV), 1)
    return world > 1 and not torch.accelerator.is_available() and not is_torch_xla_available()


def _end_process_group_at_exit() -> None:
    """A gloo process group left for the interpreter's finalisation sometimes aborts the process
    (SIGABRT, "terminate called without an active exception": its worker threads outlive Python,
    pytorch#190489), failing a command that had already written its output. Ending it while Python
    is still whole made that rarer, not impossible, so the CLI also skips the teardown
    (bertkit/cli/process_end.py). Registered once per process, however many engines follow."""
    atexit.unregister(_end_process_group)
    atexit.register(_end_process_group)


def _end_process_group() -> None:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


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


@contextmanager
def _unused_checkpoints_go(checkpoints, main: bool):
    """A run that fails (an error, not a stop: those are BaseExceptions and keep what they saved)
    before its first complete checkpoint leaves no checkpoints directory holding only a history."""
    try:
        yield
    except Exception:
        if checkpoints is not None and main:
            checkpoints.discard_if_unused()
        raise
