"""`bertkit finetune multi --from DIR --task NEW:KIND:DATA`: new heads added to a trained multi-head
model. The new heads train over DIR's encoder (its weights written once as a plain transformers
checkpoint in a scratch directory, which every head's task model loads as it loads any ``--model``);
DIR's heads are carried over as they are, reading the one encoder. With ``--freeze-encoder`` only the
new heads' own layers train, so DIR's heads answer exactly as before; without it the encoder moves,
and each old head is scored on its own evaluation data before and after training (the same engine,
the same batches): the change of its main metric is recorded (``forgetting``) and a drop of more
than ``FORGETTING_WARNING`` is said."""

from __future__ import annotations

import tempfile
from pathlib import Path

from bertkit.api.multihead_inference import head_source, is_multi_head
from bertkit.errors import BertkitError
from bertkit.events import notice
from bertkit.inference import score
from bertkit.model_dir import check_inputs_kept, load_meta
from bertkit.options import EvalOptions
from bertkit.tasks import task_from_state
from bertkit.tasks.base import EVAL
from bertkit.tasks.multihead import combined_metrics

FORGETTING_WARNING = 0.01  # a main metric one point lower on an old head's own evaluation data is said


class AddedHeads:
    """DIR's heads and encoder, what the new heads train over; scores of the old heads kept."""

    def __init__(self, from_dir: str, new_names: list[str], output: str, freeze_encoder: bool):
        self.from_dir, self.freeze_encoder = str(from_dir), freeze_encoder
        self.meta = load_meta(self.from_dir)
        if not is_multi_head(self.meta):
            raise BertkitError(
                f"--from {from_dir} is a one-task model; --from adds heads to a multi-head directory",
                "train the tasks together with bertkit finetune multi (one --task each)",
            )
        self.records = {h["name"]: h for h in self.meta["heads"]}
        taken = [name for name in new_names if name in self.records]
        if taken:
            raise BertkitError(
                f"--from {from_dir} already has a head {taken[0]!r}",
                f"give the new head another name (its heads: {', '.join(self.records)})",
            )
        check_inputs_kept(Path(output).expanduser().resolve(), self.from_dir)
        self.adapters = {name: task_from_state(h["task"]) for name, h in self.records.items()}
        self.base: str | None = None  # the scratch encoder checkpoint, once written
        self.old = None  # DIR's MultiHeadModel, until its heads join the new encoder (old_heads)
        self.old_heads: dict = {}
        self.before: dict = {}
        self.evaluation: dict = {}  # name -> (examples, features) of the old heads that have evaluation data

    def encoder_checkpoint(self) -> str:
        """DIR's encoder as a plain transformers checkpoint (config, weights, tokenizer) in a scratch
        directory: what the new heads' task models load, as from any --model."""
        from bertkit.models import load_config
        from bertkit.models.tokenizer import load_tokenizer
        from bertkit.networks.multihead import load_multihead

        heads = [(h["name"], h["model_class"], h["model_config"]) for h in self.records.values()]
        self.old = load_multihead(self.from_dir, heads)
        self.scratch = tempfile.TemporaryDirectory(prefix="bertkit-from-encoder-")
        self.base = self.scratch.name
        self.old.encoder.save_pretrained(self.base)
        config = load_config(self.from_dir, self.from_dir)
        load_tokenizer(self.from_dir, self.from_dir, config).save_pretrained(self.base)
        return self.base

    def discard(self) -> None:
        if self.base is not None:
            self.scratch.cleanup()

    def join(self, network) -> None:
        """DIR's heads read ``network``'s encoder (loaded from DIR's weights); frozen, with --freeze-encoder."""
        from bertkit.networks.multihead import attach

        self.old_heads, self.old = dict(self.old.heads.items()), None  # DIR's own encoder copy is freed
        for model in self.old_heads.values():
            attach(model, network.encoder)
            model.requires_grad_(False)  # not trained here: their data is not given
        if self.freeze_encoder:
            network.encoder.requires_grad_(False)

    def score_before(self, engine, tokenizer, batch_size: int, encoder) -> None:
        """Each old head with evaluation data scored now, over the encoder as DIR saved it."""
        for name, adapter in self.adapters.items():
            try:
                source = head_source(self.records[name], EvalOptions())
            except BertkitError:
                notice(
                    "warning", f"--from: head {name} has no evaluation data recorded: its forgetting is not measured"
                )
                continue
            examples = adapter.read(source, EVAL)
            self.evaluation[name] = (examples, adapter.preprocess(examples, tokenizer, train=False))
        self.before = self._scores(engine, tokenizer, batch_size, encoder)

    def _scores(self, engine, tokenizer, batch_size: int, encoder) -> dict:
        from bertkit.networks.multihead import HeadView

        found = {}
        for name, (examples, features) in self.evaluation.items():
            view = HeadView(encoder, self.old_heads[name])
            found[name], _ = score(
                engine, self.adapters[name], view, examples, features, batch_size, tokenizer.pad_token_id
            )
        return found

    def finish(self, engine, tokenizer, batch_size: int, model):
        """The saved model: DIR's heads first, then the new ones, over the trained encoder; the old
        heads scored again (the forgetting section)."""
        from bertkit.networks.multihead import MultiHeadModel, attach

        for head in self.old_heads.values():
            attach(head, model.encoder)
        after = self._scores(engine, tokenizer, batch_size, model.encoder)
        self.forgetting = {}
        for name, metrics in after.items():
            main = self.records[name].get("main_metric") or self.adapters[name].main_metric
            change = metrics[main] - self.before[name][main]
            self.forgetting[name] = {"metric": main, "before": self.before[name][main], "after": metrics[main]}
            self.forgetting[name]["change"] = round(change, 6)
            if change < -FORGETTING_WARNING:
                notice(
                    "warning",
                    f"--from: head {name} lost {-change:.4f} {main} on its own evaluation data while the new heads "
                    f"trained ({self.before[name][main]:.4f} -> {metrics[main]:.4f}); --freeze-encoder keeps it",
                )
        self.after = after
        return MultiHeadModel(model.encoder, {**self.old_heads, **dict(model.heads.items())}).eval()

    def merge_meta(self, meta: dict) -> dict:
        """DIR's head records (metrics re-scored) before the new heads'; where the run started."""
        old = [
            {**record, "metrics": self.after.get(name, record.get("metrics"))} for name, record in self.records.items()
        ]
        meta["heads"] = old + meta["heads"]
        mains = {h["name"]: h.get("main_metric") for h in meta["heads"]}
        scales = {h["name"]: task_from_state(h["task"]).metric_scale for h in meta["heads"]}
        meta["metrics"] = combined_metrics({h["name"]: h.get("metrics") or {} for h in meta["heads"]}, mains, scales)
        meta["task"]["max_length"] = max(meta["task"]["max_length"], self.meta["task"].get("max_length") or 0)
        meta["base_model"] = self.meta.get("base_model")
        meta["data"] = {**(self.meta.get("data") or {}), **meta["data"]}
        meta["from"] = {"model": self.from_dir, "freeze_encoder": self.freeze_encoder, "forgetting": self.forgetting}
        return meta
