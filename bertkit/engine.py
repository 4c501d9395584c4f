"""The training and inference engine: the only module that imports Accelerate.

It knows nothing about tasks: it gets feature dicts, a model and a few callbacks, and gives back
numbers (``fit``) or per-feature numpy outputs in feature order (``infer``). The same code runs on
CPU, one GPU, several GPUs or TPU under ``accelerate launch``.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field

import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.utils.data import DataLoader
from tqdm.auto import tqdm

from bertkit.batching import Collator, LengthGroupedBatches, sorted_batches
from bertkit.config import TrainConfig
from bertkit.errors import BertkitError

NO_DECAY = ("bias", "LayerNorm.weight", "layer_norm.weight", "norm.weight")


@dataclass
class TrainReport:
    history: list = field(default_factory=list)  # one dict per evaluation: epoch, train_loss, metrics
    best_epoch: float | None = None
    best_metric: float | None = None
    train_seconds: float = 0.0
    examples: int = 0
    real_tokens: int = 0
    padded_tokens: int = 0
    optimizer_steps: int = 0
    stopped_early: bool = False

    def throughput(self) -> dict:
        seconds = max(self.train_seconds, 1e-9)
        return {"train_seconds": round(self.train_seconds, 3), "examples_per_s": round(self.examples / seconds, 2),
                "tokens_per_s": round(self.real_tokens / seconds, 1),
                "padding_share": round(1 - self.real_tokens / max(self.padded_tokens, 1), 4),
                "optimizer_steps": self.optimizer_steps}


class Engine:
    def __init__(self, precision: str = "no", grad_accum: int = 1, seed: int = 42):
        if precision == "fp16" and not torch.cuda.is_available():
            raise BertkitError("--precision fp16 needs a GPU", "use --precision bf16 or no on CPU")
        self.accelerator = Accelerator(mixed_precision=precision, gradient_accumulation_steps=grad_accum)
        self.seed = seed
        set_seed(seed)

    @property
    def is_main_process(self) -> bool:
        return self.accelerator.is_main_process

    def _progress(self, total: int, description: str):
        return tqdm(total=total, desc=description, unit="batch", leave=False, file=sys.stderr,
                    disable=not self.accelerator.is_local_main_process, dynamic_ncols=True)

    def prepare_model(self, model):
        return self.accelerator.prepare_model(model, evaluation_mode=True)

    def unwrap(self, model):
        return self.accelerator.unwrap_model(model)

    # --- training -----------------------------------------------------------------------------
    def fit(self, model, features: list[dict], config: TrainConfig, pad_token_id: int,
            evaluate=None, main_metric: str | None = None, collate_fn=None) -> tuple[object, TrainReport]:
        """Train with AdamW, linear warmup/decay, clipping; evaluate after each epoch and keep the
        best weights by ``main_metric``. ``evaluate(model) -> dict`` is the task's evaluation.
        ``collate_fn`` replaces the padding collator (masked-LM batches are masked there)."""
        from transformers import get_linear_schedule_with_warmup

        acc = self.accelerator
        set_seed(self.seed)
        sampler = LengthGroupedBatches([len(f["input_ids"]) for f in features], config.batch_size, config.seed)
        loader = DataLoader(features, batch_sampler=sampler, collate_fn=collate_fn or Collator(pad_token_id))
        steps_per_epoch = math.ceil(len(sampler) / config.grad_accum)
        total_steps = max(1, math.ceil(steps_per_epoch * config.epochs))
        # The fused kernel (CPU and CUDA) does one pass over the parameters instead of several.
        optimizer = torch.optim.AdamW(_parameter_groups(model, config.weight_decay), lr=config.lr, fused=True)
        scheduler = get_linear_schedule_with_warmup(optimizer, int(config.warmup_ratio * total_steps), total_steps)
        model, optimizer, loader, scheduler = acc.prepare(model, optimizer, loader, scheduler)
        local_total = max(1, math.ceil(math.ceil(len(loader) / config.grad_accum) * config.epochs))

        report, best_state, bad_evals = TrainReport(), None, 0
        progress = self._progress(local_total * config.grad_accum, "train")
        counts = torch.zeros(3, dtype=torch.long, device=acc.device)  # examples, real tokens, padded tokens
        for epoch in range(math.ceil(config.epochs)):
            sampler.set_epoch(epoch)
            model.train()
            started, loss_sum, loss_batches = time.perf_counter(), torch.zeros((), device=acc.device), 0
            for batch in loader:
                with acc.accumulate(model):
                    loss = model(**batch).loss
                    acc.backward(loss)
                    if acc.sync_gradients and config.max_grad_norm > 0:
                        acc.clip_grad_norm_(model.parameters(), config.max_grad_norm)
                    optimizer.step()
                    scheduler.step()
                    optimizer.zero_grad(set_to_none=True)
                mask = batch["attention_mask"]
                counts += torch.stack([torch.tensor(mask.shape[0]), mask.sum().cpu(), torch.tensor(mask.numel())]).to(counts.device)
                loss_sum += loss.detach()
                loss_batches += 1
                progress.update(1)
                if acc.sync_gradients:
                    report.optimizer_steps += 1
                    if report.optimizer_steps % 20 == 0:
                        progress.set_postfix(epoch=epoch + 1, loss=f"{loss_sum.item() / loss_batches:.4f}")
                    if report.optimizer_steps >= local_total:
                        break
            report.train_seconds += time.perf_counter() - started
            entry = {"epoch": round(min(epoch + 1, config.epochs), 3),
                     "train_loss": round(float(acc.reduce(loss_sum, "mean").item()) / max(loss_batches, 1), 5)}
            if evaluate is not None:
                metrics = evaluate(model)
                entry["metrics"] = metrics
                score = metrics[main_metric]
                if report.best_metric is None or score > report.best_metric:
                    report.best_metric, report.best_epoch, bad_evals = score, entry["epoch"], 0
                    best_state = _copy_state(acc.unwrap_model(model))
                else:
                    bad_evals += 1
            report.history.append(entry)
            if config.patience and bad_evals >= config.patience:
                report.stopped_early = True
                break
            if report.optimizer_steps >= local_total:
                break
        progress.close()
        totals = acc.reduce(counts, "sum").tolist()
        report.examples, report.real_tokens, report.padded_tokens = (int(x) for x in totals)
        model = acc.unwrap_model(model)
        if best_state is not None and report.best_epoch != report.history[-1]["epoch"]:
            model.load_state_dict(best_state)
        return model, report

    # --- inference ----------------------------------------------------------------------------
    def infer(self, model, features: list[dict], batch_size: int, output_names: tuple, per_token: bool,
              pad_token_id: int, description: str = "predict") -> dict:
        """Model outputs for every feature, in feature order: ``{name: [np.ndarray per feature]}``.
        Per-token outputs are trimmed to each feature's own length."""
        acc = self.accelerator
        lengths = [len(f["input_ids"]) for f in features]
        indexed = [{**f, "feature_index": i} for i, f in enumerate(features)]
        loader = DataLoader(indexed, batch_sampler=sorted_batches(lengths, batch_size),
                            collate_fn=Collator(pad_token_id, with_index=True))
        loader = acc.prepare_data_loader(loader)
        results = {name: [None] * len(features) for name in output_names}
        model.eval()
        progress = self._progress(len(loader), description)
        with torch.inference_mode(), acc.autocast():
            for batch in loader:
                index = batch.pop("feature_index")
                inputs = {k: v for k, v in batch.items() if k in ("input_ids", "token_type_ids", "attention_mask")}
                outputs = model(**inputs)
                index = acc.gather_for_metrics(index).cpu().numpy()
                for name in output_names:
                    values = outputs[name].float()
                    if per_token:
                        values = acc.pad_across_processes(values, dim=1)
                    values = acc.gather_for_metrics(values).cpu().numpy()
                    for row, feature_index in enumerate(index):
                        value = values[row]
                        results[name][feature_index] = value[:lengths[feature_index]] if per_token else value
                progress.update(1)
        progress.close()
        return results


def _parameter_groups(model, weight_decay: float) -> list[dict]:
    decay, no_decay = [], []
    for name, parameter in model.named_parameters():
        if parameter.requires_grad:
            (no_decay if name.endswith(NO_DECAY) else decay).append(parameter)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def _copy_state(model) -> dict:
    return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}

