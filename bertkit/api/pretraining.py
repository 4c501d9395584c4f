"""``bertkit pretrain mlm`` as an API: continued masked-LM pre-training on raw text.

It is finetune with the ``mlm`` task, through the same engine (``Engine.fit`` with the task's
masking collator) and the same all-or-nothing model directory. It differs from ``api.finetune``
in two places only: batches are masked in the collator, and evaluation scores a wrapper
(``MaskedLMScorer``) that masks held-out text itself, because ``Engine.infer`` hands a model
nothing but token ids. The held-out text is scored once before training too, so the report
says how much pre-training changed it.

The output directory holds an ``AutoModelForMaskedLM`` checkpoint that ``bertkit finetune --model
DIR``, ``bertkit embed`` and plain transformers load. BERT's pooler (the dense layer on [CLS] that
sequence classifiers use) is not part of a masked-LM model; the base model's pooler is carried
over unchanged, so fine-tuning from DIR starts from it rather than from a random one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from bertkit.model_dir import ModelMeta, check_output_dir, data_record, save_model_dir, staged_output
from bertkit.config import TrainConfig
from bertkit.data import registry
from bertkit.errors import BertkitError
from bertkit.models import DEFAULT_MODEL, load_model, load_tokenizer, resolve_model
from bertkit.tasks.base import EVAL, TRAIN
from bertkit.tasks.mlm import MaskedLMTask, hold_out_documents

DEFAULT_CONFIG = TrainConfig(lr=5e-5, epochs=3.0)


@dataclass
class PretrainResult:
    output_dir: str
    before: dict  # held-out metrics of the starting model
    metrics: dict  # held-out metrics of the saved epoch
    history: list
    best_epoch: float | None
    throughput: dict
    preprocessing: dict = field(default_factory=dict)
    pooler: str = ""


def pretrain_mlm(data: str, output: str, model: str = DEFAULT_MODEL, eval_data: str | None = None,
                 eval_share: float = 0.1, config: TrainConfig | None = None, mask_rate: float = 0.15,
                 mask_token_share: float = 0.8, random_token_share: float = 0.1, whole_word_masking: bool = False,
                 overwrite: bool = False) -> PretrainResult:
    """Continue masked-LM pre-training of ``model`` on the text in ``data``; save a model directory."""

    config = (config or DEFAULT_CONFIG).validate()
    options = {"mask_rate": mask_rate, "mask_token_share": mask_token_share,
               "random_token_share": random_token_share, "whole_word_masking": whole_word_masking}
    adapter = MaskedLMTask(config.max_length or MaskedLMTask.default_max_length, options)
    if not 0 <= eval_share < 1:
        raise BertkitError("--eval-share must be in [0, 1) (0: no held-out evaluation)", "e.g. --eval-share 0.1")
    output_path = Path(output).expanduser().resolve()
    check_output_dir(output_path, overwrite)

    train_source = registry.resolve(data, "train", None, adapter.name)
    documents = adapter.read(train_source, TRAIN)
    eval_source, held_out = None, []
    if eval_data:
        eval_source = registry.resolve(eval_data, "dev", None, adapter.name)
        held_out = adapter.read(eval_source, EVAL)
    elif eval_share > 0:
        documents, held_out = hold_out_documents(documents, eval_share, config.seed, train_source.description)
    documents = documents[:config.max_train_samples or None]
    held_out = held_out[:config.max_eval_samples or None]

    model_ref = resolve_model(model)
    tokenizer = load_tokenizer(model_ref, model)
    _check_positions(model_ref, model, adapter.max_length)
    collate = adapter.collator(tokenizer, config.seed)  # checks the mask token and whole-word support
    train_features = adapter.preprocess(documents, tokenizer, train=True)
    preprocessing = {"train": dict(adapter.stats)}
    eval_features = adapter.preprocess(held_out, tokenizer, train=False) if held_out else []
    if held_out:
        preprocessing["eval"] = dict(adapter.stats)

    from bertkit.engine import Engine  # heavy: torch + accelerate
    from bertkit.networks.masking import MaskedLMTrainer

    engine = Engine(config.precision, config.seed)
    network = load_model(adapter.model_class, model_ref, model)
    pooler = _base_pooler(model_ref, model, network)

    def evaluate(current) -> dict:
        unwrapped = engine.unwrap(current)
        masked_lm = unwrapped.model if isinstance(unwrapped, MaskedLMTrainer) else unwrapped
        scorer = adapter.scoring_network(masked_lm, tokenizer)  # shares the weights, already on the device
        outputs = engine.infer(scorer, eval_features, config.eval_batch_size, adapter.output_names, False,
                               tokenizer.pad_token_id, description="eval")
        metrics = adapter.metrics(held_out, adapter.postprocess(held_out, eval_features, outputs))
        return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in metrics.items()}

    before = evaluate(network.to(engine.accelerator.device)) if held_out else {}
    trainer, report = engine.fit(MaskedLMTrainer(network), train_features, config, tokenizer.pad_token_id,
                                 evaluate if held_out else None, adapter.main_metric, collate_fn=collate,
                                 greater_is_better=adapter.greater_is_better)
    best = next((h for h in report.history if h["step"] == report.best_step), report.history[-1])
    trained = trainer.model
    base = getattr(trained, trained.base_model_prefix)
    if pooler is not None and getattr(base, "pooler", False) is None:
        base.pooler = pooler.to(next(trained.parameters()).device)
    pooler_note = "kept from the base model (not trained: no NSP)" if pooler is not None else "none in the base model"
    result = PretrainResult(str(output_path), before, best.get("metrics", {}), report.history, report.best_epoch,
                            report.throughput(), preprocessing, pooler_note)
    meta = ModelMeta(
        kind="pretrain", task=adapter.state(), base_model=model, config=config.to_dict(),
        pretraining={"objective": "masked LM", "mask_rate": mask_rate, "mask_token_share": mask_token_share,
                     "random_token_share": random_token_share, "whole_word_masking": whole_word_masking,
                     "next_sentence_prediction": "not used (RoBERTa: dropping NSP matches or improves results)",
                     "pooler": pooler_note},
        data=data_record(train_source, eval_source, len(documents), len(held_out), eval_description=(
            f"{len(held_out)} held-out documents of the training file" if held_out and not eval_source else None)),
        before=before, metrics=result.metrics, best_epoch=report.best_epoch, best_step=report.best_step,
        history=report.history, throughput=result.throughput, preprocessing=preprocessing,
        stopped_early=report.stopped_early, runtime=engine.runtime(config.precision))
    if engine.is_main_process:
        with staged_output(output_path) as staging:
            save_model_dir(staging, trained, tokenizer, meta)
    engine.accelerator.wait_for_everyone()
    return result


def _check_positions(model_ref: str, display_name: str, max_length: int) -> None:
    from transformers import AutoConfig

    positions = getattr(AutoConfig.from_pretrained(model_ref), "max_position_embeddings", None)
    if positions and max_length > positions:
        raise BertkitError(f"--max-length {max_length} exceeds the {positions} positions of --model {display_name}",
                           f"use --max-length {positions} or less")


def _base_pooler(model_ref: str, display_name: str, masked_lm):
    """The base checkpoint's pooler, when it has one and the masked-LM class drops it (BERT)."""
    base = getattr(masked_lm, masked_lm.base_model_prefix, None)
    if base is None or getattr(base, "pooler", False) is not None:
        return None
    encoder, info = load_model("AutoModel", model_ref, display_name, with_loading_info=True)
    pooler = getattr(encoder, "pooler", None)
    if pooler is None or any(key.startswith("pooler.") for key in info.get("missing_keys", ())):
        return None
    return pooler
