"""LoRA (Hu et al., 2021) through peft: low-rank adapters on the encoder's linear layers, the task
head trained whole, everything else frozen.

``add_adapters`` puts peft's LoRA layers into the model in place (peft's functional
``inject_adapter_in_model``: the model keeps its class, its forward and its head's weight names,
so the engine trains it like any model and checkpoints hold the adapters with it). The head (what
is not the encoder, and the encoder's pooler, which BERT's sequence head reads) trains fully: it is
re-enabled here rather than wrapped in peft's ``modules_to_save``, which would keep a frozen copy
beside it and rename its weights. ``merged`` folds each adapter into its layer, W + (alpha/R) B A,
giving back a plain transformers model; ``save_adapter`` writes only the adapters and the head in
peft's own format (``PeftModel.from_pretrained`` reads it too), and ``load_adapter_model`` builds
the model again over the recorded base model.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from bertkit.errors import BertkitError
from bertkit.events import notice
from bertkit.models import load_model, resolve_model

ADAPTER_CONFIG, ADAPTER_WEIGHTS = "adapter_config.json", "adapter_model.safetensors"
PEFT_PREFIX = "base_model.model."  # peft's saved names: PeftModel -> its LoraModel -> the model
DEFAULT_ALPHA_PER_RANK = 2  # alpha = 2R: the update's scale alpha/R is 2 whatever the rank
# The attention's query and value projections of each family (Hu et al. adapt W_q and W_v)
FAMILY_TARGETS = {
    "bert": ("query", "value"),
    "roberta": ("query", "value"),
    "electra": ("query", "value"),
    "albert": ("query", "value"),
    "distilbert": ("q_lin", "v_lin"),
    "deberta-v2": ("query_proj", "value_proj"),
    "modernbert": ("Wqkv",),  # one fused projection: query, key and value together
}
PEFT_TASK_TYPES = {
    "AutoModelForSequenceClassification": "SEQ_CLS",
    "AutoModelForTokenClassification": "TOKEN_CLS",
    "AutoModelForQuestionAnswering": "QUESTION_ANS",
}
PEFT_HINT = "pip install 'bertkit[lora]'"
LOW_LR = 1e-4  # below it, --lora says that adapters usually take larger steps


@dataclass(frozen=True)
class LoraSettings:
    rank: int
    alpha: float
    dropout: float
    targets: tuple | None  # None: the family's query and value projections

    @classmethod
    def of(cls, config) -> LoraSettings | None:
        """From a TrainConfig (None: full fine-tuning)."""
        if config.lora is None:
            return None
        targets = None
        if config.lora_targets is not None:
            targets = tuple(dict.fromkeys(t.strip() for t in config.lora_targets.split(",") if t.strip()))
        alpha = config.lora_alpha if config.lora_alpha is not None else DEFAULT_ALPHA_PER_RANK * config.lora
        dropout = config.lora_dropout if config.lora_dropout is not None else 0.1
        return cls(config.lora, float(alpha), float(dropout), targets)


def _peft():
    try:
        import peft
    except ImportError:
        raise BertkitError("--lora needs peft, which is not installed", PEFT_HINT) from None
    return peft


def encoder_prefix(model) -> str:
    """Where the encoder sits in ``model``: under its base model's attribute in a task model
    (``bert.``), or "" when ``model`` is the bare encoder itself (AutoModel: an embedding model)."""
    prefix = getattr(model, "base_model_prefix", "") or ""
    return f"{prefix}." if prefix and getattr(model, prefix, None) is not None else ""


def _pooler(name: str, prefix: str) -> bool:
    return name.startswith(f"{prefix}pooler.")


def head_parameter_names(model) -> list[str]:
    """The head's weights: everything outside the encoder, and the encoder's pooler."""
    prefix = encoder_prefix(model)
    return [name for name, _ in model.named_parameters() if not name.startswith(prefix) or _pooler(name, prefix)]


def head_modules(model) -> list[str]:
    """peft's ``modules_to_save`` names of the head: its top-level modules, and ``pooler``."""
    prefix = encoder_prefix(model)
    head = head_parameter_names(model)
    found = sorted({name.split(".")[0] for name in head if not name.startswith(prefix)})
    return found + (["pooler"] if any(_pooler(name, prefix) for name in head) else [])


def linear_layers(model) -> list[str]:
    """The full names of the encoder's linear layers (the pooler's excepted: it is the head's)."""
    from torch import nn  # here: finetune imports this module before it knows whether torch is needed

    prefix = encoder_prefix(model)
    return [
        name
        for name, module in model.named_modules()
        if isinstance(module, nn.Linear) and name.startswith(prefix) and not _pooler(name + ".", prefix)
    ]


def chosen_targets(model, settings: LoraSettings, display_name: str) -> tuple:
    """The layer names to adapt, each matching at least one linear layer of the encoder (as peft
    matches them: the full name, or its ending after a dot)."""
    layers = linear_layers(model)
    ends = sorted({name.rsplit(".", 1)[-1] for name in layers})
    model_type = getattr(model.config, "model_type", "?")
    targets = settings.targets or FAMILY_TARGETS.get(model_type)
    if targets is None:
        raise BertkitError(
            f"--lora: bertkit has no default layers to adapt for {display_name} ({model_type}); "
            f"its linear layers: {', '.join(ends)}",
            "name them with --lora-targets, e.g. the attention's query and value projections",
        )

    def matches(target: str) -> bool:
        return any(n == target or n.endswith("." + target) for n in layers)

    unmatched = [t for t in targets if not matches(t)]
    if unmatched:  # the names said and suggested are the layers this model has (a bare encoder's too)
        suggested = [t for t in FAMILY_TARGETS.get(model_type, ()) if matches(t)] or ends[:2]
        raise BertkitError(
            f"--lora-targets {','.join(unmatched)} matches no linear layer of {display_name}'s encoder; "
            f"its linear layers are named {', '.join(ends) or '(none found)'}",
            f"use some of those, e.g. --lora-targets {','.join(suggested)}" if suggested else "drop --lora",
        )
    return tuple(targets)


def peft_config(settings: LoraSettings, targets: tuple, model=None, model_class: str | None = None, base=None):
    """peft's LoraConfig: the adapters, and (to save) the head as modules_to_save and the base model."""
    extra = {}
    if model is not None:
        extra = {
            "modules_to_save": head_modules(model),
            "task_type": PEFT_TASK_TYPES.get(model_class),
            "base_model_name_or_path": base,
        }
    return _peft().LoraConfig(
        r=settings.rank,
        lora_alpha=settings.alpha,
        lora_dropout=settings.dropout,
        target_modules=list(targets),
        bias="none",
        **extra,
    )


def add_adapters(model, settings: LoraSettings, display_name: str) -> dict:
    """Adapters into ``model`` (in place), the encoder frozen, the head trainable; returns what was
    made (targets, parameter counts) for the console and bertkit.json."""
    targets = chosen_targets(model, settings, display_name)
    total_before = sum(p.numel() for p in model.parameters())
    _peft().inject_adapter_in_model(peft_config(settings, targets), model)
    _drop_peft_marks(model)
    head = set(head_parameter_names(model))
    for name, parameter in model.named_parameters():
        parameter.requires_grad_(name in head or ".lora_" in name)
    adapters = sum(p.numel() for n, p in model.named_parameters() if ".lora_" in n)
    head_count = sum(p.numel() for n, p in model.named_parameters() if n in head)
    return {
        **asdict(settings),
        "targets": list(targets),
        "adapted_layers": sum(1 for n, _ in model.named_modules() if n.endswith(".lora_A")),
        "trainable_parameters": adapters + head_count,
        "adapter_parameters": adapters,
        "head_parameters": head_count,
        "base_parameters": total_before,
    }


def trainable_text(facts: dict) -> str:
    share = 100 * facts["trainable_parameters"] / max(facts["base_parameters"], 1)
    return (
        f"LoRA rank {facts['rank']}, alpha {facts['alpha']:g}, dropout {facts['dropout']:g} on "
        f"{facts['adapted_layers']} layers ({', '.join(facts['targets'])}): trainable parameters "
        f"{facts['trainable_parameters']:,} of {facts['base_parameters']:,} ({share:.2f}%): adapters "
        f"{facts['adapter_parameters']:,}, head {facts['head_parameters']:,}"
    )


def _drop_peft_marks(model) -> None:
    """peft notes its config on the model; transformers' save_pretrained would then save an adapter."""
    for name in ("peft_config", "_hf_peft_config_loaded"):
        if name in model.__dict__:
            delattr(model, name)


def merged(model):
    """Each adapter folded into its layer (W + alpha/R B A, peft's merge) and the layer put back:
    a plain transformers model, same class, same weight names as the base."""
    from peft.tuners.lora import LoraLayer

    for name, module in list(model.named_modules()):
        if isinstance(module, LoraLayer):
            module.merge(safe_merge=True)  # safe: a NaN in an adapter is an error, not a saved model
            parent, _, child = name.rpartition(".")
            setattr(model.get_submodule(parent), child, module.get_base_layer())
    _drop_peft_marks(model)
    return model


def adapter_state(model) -> dict:
    """The adapters' and the head's weights under peft's saved names."""
    head = set(head_parameter_names(model))
    return {
        PEFT_PREFIX + name.replace(".default.", "."): parameter.detach().cpu().contiguous()
        for name, parameter in model.named_parameters()
        if ".lora_" in name or name in head
    }


def save_adapter(directory: Path, model, facts: dict, model_class: str, base: str) -> None:
    """``adapter_config.json`` + ``adapter_model.safetensors`` (peft's format) and ``config.json``
    (the head's labels, so eval/predict read them as from any model directory)."""
    from safetensors.torch import save_file

    settings = LoraSettings(facts["rank"], facts["alpha"], facts["dropout"], tuple(facts["targets"]))
    peft_config(settings, settings.targets, model, model_class, base).save_pretrained(str(directory))
    save_file(adapter_state(model), str(directory / ADAPTER_WEIGHTS), metadata={"format": "pt"})
    model.config.architectures = [type(model).__name__]
    model.config.save_pretrained(directory)


def base_model_of(record: dict) -> str:
    return record.get("base_model") or ""


def load_adapter_model(model_dir: str, record: dict, model_class: str, model_config):
    """The merged model of an adapter directory: the recorded base model with the directory's
    config (its labels), the adapters and head loaded, then merged."""
    base = base_model_of(record)
    try:
        base_ref = resolve_model(base)
        model = load_model(model_class, base_ref, base, config=model_config)
    except BertkitError as exc:  # said without load_model's "--model": eval and predict have no such flag
        why = exc.message.removeprefix(f"--model {base}").removeprefix(": ").removeprefix(" ")
        raise BertkitError(
            f"{model_dir} holds LoRA adapters over the base model {base}, which cannot be loaded ({why})",
            f"put the base model back where bertkit.json's lora.base_model says ({base}), or fine-tune again "
            "without --save-adapter",
        ) from None
    settings = LoraSettings(record["rank"], record["alpha"], record["dropout"], tuple(record["targets"]))
    _peft().inject_adapter_in_model(peft_config(settings, settings.targets), model)
    _load_adapter_weights(model, Path(model_dir))
    return merged(model)


def _load_adapter_weights(model, directory: Path) -> None:
    from safetensors.torch import load_file

    try:
        saved = load_file(str(directory / ADAPTER_WEIGHTS))
    except Exception as exc:  # safetensors' own error for a truncated file, OSError for a missing one
        raise BertkitError(
            f"{directory}/{ADAPTER_WEIGHTS} cannot be read ({type(exc).__name__}: {str(exc)[:120]})",
            "copy the model directory again, or fine-tune again",
        ) from None
    wanted = set(adapter_state(model))
    names = {key: key.removeprefix(PEFT_PREFIX) for key in saved}
    state = {}
    for key, short in names.items():
        target = short.replace(".lora_A.", ".lora_A.default.").replace(".lora_B.", ".lora_B.default.")
        state[target] = saved[key]
    if set(saved) != wanted:
        missing = sorted(wanted - set(saved)) or sorted(set(saved) - wanted)
        raise BertkitError(
            f"{directory}/{ADAPTER_WEIGHTS} does not match its adapter_config.json and config.json (e.g. {missing[0]})",
            "copy the model directory again, or fine-tune again",
        )
    try:
        model.load_state_dict(state, strict=False)
    except RuntimeError as exc:
        raise BertkitError(
            f"{directory}/{ADAPTER_WEIGHTS} does not fit the base model ({str(exc).splitlines()[-1].strip()[:160]})",
            "the base model changed since training; put the original back, or fine-tune again",
        ) from None


def with_adapters(network, config, model_name: str, directory_kind: str, notices: list) -> dict | None:
    """finetune's hook: adapters into ``network`` when ``config`` (a TrainConfig) asks for them;
    what was made, said now (the trainable parameters; also added to ``notices``, the result's)
    and kept for bertkit.json's lora section. None: full fine-tuning."""
    settings = LoraSettings.of(config)
    if settings is None:
        return None
    if directory_kind != "finetune":
        raise BertkitError("--lora trains adapters for finetune's tasks only", "drop --lora")
    facts = add_adapters(network, settings, model_name)
    local = Path(model_name).expanduser()  # the base an adapter directory is loaded over, from anywhere
    facts["base_model"] = str(local.resolve()) if local.exists() else model_name
    facts["saved"] = "adapter" if config.save_adapter else "merged"
    said = [trainable_text(facts)]
    if config.lr < LOW_LR:
        said.append(
            f"--lr {config.lr:g} with --lora: adapters usually need a larger learning rate "
            "(Hu et al. used 4e-4 to 5e-4 for RoBERTa-base on GLUE; docs: lora.md)"
        )
    for text in said:
        notice("weights", text, **facts)
    notices.extend(said)
    return facts


def finish(finished, facts: dict | None, model_class: str):
    """The model to save merged into ``finished`` (the default), or a writer of the adapter files
    (--save-adapter) for save_model_dir; the lora section goes in ``finished.facts``."""
    if facts is None:
        return None
    finished.facts["lora"] = facts
    if facts["saved"] == "merged":
        finished.model = merged(finished.model)
        return None
    return lambda directory, model: save_adapter(directory, model, facts, model_class, facts["base_model"])
