"""LoRA (Hu et al., 2021) as a training method: low-rank adapters on the encoder's linear layers,
the head trained whole, everything else frozen (the torch work: bertkit/networks/lora.py).

Its hooks: the adapters go in after the model loads (``adapt_network``); when training is done
they are merged into the weights, or (``--save-adapter``) written as peft's adapter files
(``finish``, ``owned_files``); bertkit.json's ``lora`` section records what was made, the card
says it, and an adapter directory loads by putting the adapters back over its base model
(``load_trained``).
"""

from __future__ import annotations

from bertkit.errors import BertkitError
from bertkit.methods.base import Method
from bertkit.tasks.training_spec import FINE_TUNE


class Lora(Method):
    name = "lora"
    flag = "--lora"
    composes_with = ("finetune", "distill")
    section = "lora"
    owned_files = ("adapter_config.json", "adapter_model.safetensors")

    @classmethod
    def requested(cls, config) -> bool:
        return config.lora is not None

    @classmethod
    def served_tasks(cls) -> tuple:
        from bertkit.tasks import finetune_tasks

        return finetune_tasks()

    def check_data(self, run) -> None:
        recipe = run.adapter.training_spec().recipe  # known once the data is read (rerank: listwise or not)
        if self.request.save_adapter and recipe != FINE_TUNE:
            raise BertkitError(
                f"--save-adapter does not compose with {run.plan.task}'s {recipe} training: its adapters sit "
                "inside a training wrapper, under names peft cannot load",
                "drop --save-adapter (the adapters are then merged into an ordinary model)",
            )

    def adapt_network(self, network, run):
        from bertkit.networks.lora import with_adapters  # peft and torch: for a LoRA run only

        plan = run.plan
        self.facts = with_adapters(network, plan.config, plan.model, run.adapter.directory_kind, run.notices)
        return network

    def finish(self, finished, run) -> None:
        from bertkit.networks.lora import finish

        finished.save_weights = finish(finished, self.facts, run.adapter.model_class)

    def sections(self, finished, run) -> dict:
        return {"lora": self.facts}

    @classmethod
    def card_lines(cls, meta: dict) -> list[str]:
        lora = meta["lora"]
        saved = (
            "merged into the weights: an ordinary model"
            if lora.get("saved") != "adapter"
            else "saved as peft adapter files over its base model"
        )
        return [
            f"Trained with LoRA (rank {lora['rank']}, alpha {lora['alpha']:g}, on {', '.join(lora['targets'])}; "
            f"{lora['trainable_parameters']:,} trainable parameters of {lora['base_parameters']:,}), {saved}."
        ]

    @classmethod
    def card_usage(cls, meta: dict, model_name: str, hub_id) -> str | None:
        """An adapter directory: peft puts the adapters over the base model."""
        if meta["lora"].get("saved") != "adapter":
            return None
        from bertkit.tasks import task_from_state

        model_class = task_from_state(meta["task"]).model_class
        base = hub_id(meta["lora"].get("base_model")) or "PATH/TO/THE/BASE/MODEL"
        return (
            "```python\nfrom peft import PeftModel\n"
            f"from transformers import AutoConfig, {model_class}\n\n"
            f"base = {model_class}.from_pretrained({base!r}, config=AutoConfig.from_pretrained({model_name!r}))\n"
            f"model = PeftModel.from_pretrained(base, {model_name!r}).merge_and_unload().eval()\n```"
        )

    @classmethod
    def ordinary_weights(cls, meta: dict) -> bool:
        return (meta.get("lora") or {}).get("saved") != "adapter"  # merged: ordinary weights

    @classmethod
    def load_trained(cls, model_dir: str, meta: dict, model_class: str, model_config):
        record = meta.get("lora") or {}
        if record.get("saved") != "adapter":
            return None  # merged: an ordinary directory
        from bertkit.networks.lora import load_adapter_model  # torch and peft: for such a directory only

        return load_adapter_model(model_dir, record, model_class, model_config)
