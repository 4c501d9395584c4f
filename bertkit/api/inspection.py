"""``bertkit inspect``: what the tokenizer makes of a text, and where one attention head looks.

Layers count as in ``hidden_states`` (layer L's attention produces hidden state L, so 1..L;
negative numbers count from the end); heads count from 0. Attention weights need the "eager"
attention implementation (the fused kernels never materialise them), so the model is loaded
with it here only.
"""

from __future__ import annotations

import math
from pathlib import Path

from bertkit.errors import BertkitError
from bertkit.model_dir import META_FILE, atomic_file, check_inputs_kept, check_output_file, load_meta
from bertkit.models import choose_max_length, load_model, resolve_model
from bertkit.models.tokenizer import load_tokenizer
from bertkit.tasks.long_text import HEAD_TAIL, WINDOWS

PLOT_SUFFIXES = (".png", ".svg", ".pdf")
PLOTS_HINT = "pip install 'bertkit[plots]' (matplotlib), or use --json for the raw weights"
GRID_COLUMNS = 4
MAX_PIXELS = 100_000_000  # about 400 MB of RGBA while drawing


def tokens(model: str, text: str, text_pair: str | None = None, max_length: int = 512) -> dict:
    """Word pieces with ids, segment ids, positions, word index and character offsets."""
    tokenizer = load_tokenizer(resolve_model(model), model)
    encoded, truncated = _encode(tokenizer, text, text_pair, max_length)
    return {
        "model": model,
        "tokens": _token_rows(tokenizer, encoded),
        "truncated": truncated,
        "long_text": long_text_note(model, max_length, text_pair is not None) if truncated else None,
    }


def attention(
    model: str, text: str, text_pair: str | None = None, layer: int = -1, head: int | None = 0, max_length: int = 128
) -> dict:
    """Attention weights of one head (or all heads with ``head=None``) of one layer:
    ``weights[h][i][j]`` is how much token i attends to token j (rows sum to 1)."""
    import torch
    from transformers import AutoConfig

    model_ref = resolve_model(model)
    tokenizer = load_tokenizer(model_ref, model)
    config = AutoConfig.from_pretrained(model_ref)
    layers, heads = config.num_hidden_layers, config.num_attention_heads
    if layer == 0 or not -layers <= layer <= layers:
        raise BertkitError(
            f"--layer {layer}: the model's attention layers are 1..{layers}",
            f"use 1..{layers}, or -1 for the last (0 is the embeddings, which have no attention)",
        )
    if head is not None and not 0 <= head < heads:
        raise BertkitError(f"--head {head}: the model has heads 0..{heads - 1}", "or use --all-heads")
    choose_max_length(max_length, max_length, config, model)  # the one position-limit check
    encoded, truncated = _encode(tokenizer, text, text_pair, max_length)
    network = load_model("AutoModel", model_ref, model, attn_implementation="eager")
    network.eval()
    inputs = {
        k: torch.tensor([v]) for k, v in encoded.items() if k in ("input_ids", "token_type_ids", "attention_mask")
    }
    with torch.inference_mode():
        maps = network(**inputs, output_attentions=True).attentions
    if not maps:
        raise BertkitError(f"--model {model} returned no attention weights", "use a BERT-family encoder")
    number = layer if layer > 0 else layers + 1 + layer
    chosen = list(range(heads)) if head is None else [head]
    weights = maps[number - 1][0, chosen].float().numpy()
    return {
        "model": model,
        "layer": number,
        "heads": chosen,
        "tokens": _token_rows(tokenizer, encoded),
        "weights": [[[round(float(x), 6) for x in row] for row in matrix] for matrix in weights],
        "truncated": truncated,
        "long_text": long_text_note(model, max_length, text_pair is not None) if truncated else None,
    }


def long_text_note(model: str, max_length: int, pair: bool = False) -> str | None:
    """What a cut input hides for a model trained with --long-text head-tail or windows (inspect
    shows the plain encoding, cut at ``max_length``); None for any other model."""
    directory = Path(model).expanduser()
    if not (directory / META_FILE).is_file():
        return None  # a Hub name or a plain checkpoint: it reads what the tokenizer cuts
    task = load_meta(str(directory))["task"]
    options, trained = task.get("options") or {}, task.get("max_length")
    how = options.get("long_text")
    if how == HEAD_TAIL:
        head = options.get("head_tokens")
        head = f"{head} tokens" if head is not None else "a quarter of the room"
        return (
            f"this model reads a long text by --long-text head-tail, its start ({head}) and its end in one "
            f"{trained}-token window, not the cut shown here"
        )
    if how != WINDOWS:
        return None
    if pair:  # the first text is cut to half the room in each window: no plain cut equals a window
        shown = "none of them is the cut shown here"
    elif max_length == trained:
        shown = "this is its first window"
    else:
        shown = f"give --max-length {trained} to see its first"
    return (
        f"this model reads a long text in overlapping windows of {trained} tokens (--long-text windows) and "
        f"pools their logits: {shown}"
    )


def check_output(output: str | None, model: str, figure: bool) -> Path | None:
    """Fail before loading anything when the figure (or the JSON weights) cannot be written, or
    would replace a file of the model being inspected; None for stdout."""
    if figure and output is None:
        raise BertkitError("--output is needed for the figure", "e.g. --output att.png, or --json for the weights")
    if output in (None, "-"):
        return None
    if figure and Path(output).suffix.lower() not in PLOT_SUFFIXES:
        raise BertkitError(
            f"--output {output}: a figure needs one of {', '.join(PLOT_SUFFIXES)}",
            "e.g. --output att.png, or --json for the raw weights",
        )
    if figure:
        require_matplotlib()
    target = check_output_file(output)  # the shared check: missing or file parents, and a real write probe
    check_inputs_kept(target, model)
    local = Path(model).expanduser()
    if target.exists() and local.is_dir() and target.is_relative_to(local.resolve()):
        raise BertkitError(
            f"--output {output} is a file of the model {model}, which writing it would destroy",
            "write the output outside the model directory, or under a new name",
        )
    return target


def check_figure_size(width_inches: float, height_inches: float, dpi: int) -> None:
    """A --dpi that matplotlib refuses (<= 0) or that would need gigabytes of pixels: one line."""
    pixels = width_inches * dpi * height_inches * dpi
    if dpi < 1 or pixels > MAX_PIXELS:
        raise BertkitError(
            f"--dpi {dpi}: the figure would be {width_inches * max(dpi, 0):.0f}x{height_inches * max(dpi, 0):.0f} px",
            f"use a --dpi from 1 up to about "
            f"{int((MAX_PIXELS / (width_inches * height_inches)) ** 0.5)} (100 is the default)",
        )


def require_matplotlib():
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        raise BertkitError("heatmaps need matplotlib, which is not installed", PLOTS_HINT) from exc


def cell_inches(token_count: int) -> float:
    """Side of one heatmap: grows with the tokens so labels stay legible; whole quarters of an
    inch, so the pixel size is exact (at 100 dpi: 400 px up to 10 tokens, then 25 px per token)."""
    return max(4.0, math.ceil((1.5 + 0.25 * token_count) * 4) / 4)


def grid_shape(head_count: int) -> tuple[int, int]:
    """(rows, columns) of the --all-heads grid."""
    columns = min(GRID_COLUMNS, head_count)
    return math.ceil(head_count / columns), columns


def plot_attention(result: dict, output: Path, dpi: int = 100) -> tuple[int, int]:
    """Draw the heatmap(s); returns the figure's (width, height) in pixels."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    labels = [row["token"] for row in result["tokens"]]
    side = cell_inches(len(labels))
    rows, columns = grid_shape(len(result["heads"]))
    check_figure_size(columns * side, rows * side, dpi)
    figure = Figure(figsize=(columns * side, rows * side), dpi=dpi, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(rows, columns, squeeze=False)
    font = max(5, min(10, 200 // max(len(labels), 1)))
    top = max(max(max(r) for r in matrix) for matrix in result["weights"])
    for index, ax in enumerate(axes.flat):
        if index >= len(result["heads"]):
            ax.axis("off")
            continue
        image = ax.imshow(result["weights"][index], cmap="viridis", vmin=0.0, vmax=top)
        ax.set_xticks(range(len(labels)), labels, rotation=90, fontsize=font)
        ax.set_yticks(range(len(labels)), labels, fontsize=font)
        ax.set_title(f"layer {result['layer']}, head {result['heads'][index]}", fontsize=10)
        if len(result["heads"]) == 1:
            ax.set_xlabel("attended-to token (key)")
            ax.set_ylabel("attending token (query)")
    figure.colorbar(image, ax=axes, shrink=0.8 if len(result["heads"]) == 1 else 0.5)  # one scale for all heads
    figure.suptitle(f"{Path(result['model']).name}: attention weights (rows sum to 1)", fontsize=11)
    with atomic_file(Path(output), "wb") as handle:  # a full disk leaves no half-drawn figure behind
        figure.savefig(handle, format=Path(output).suffix.lstrip(".").lower(), dpi=dpi)
    width, height = figure.canvas.get_width_height()
    return width, height


def _encode(tokenizer, text: str, text_pair: str | None, max_length: int) -> tuple[dict, bool]:
    if not text or not text.strip() or (text_pair is not None and not text_pair.strip()):
        raise BertkitError(
            "--text (and --text-pair, when given) must not be empty", 'e.g. --text "the movie was great"'
        )
    if max_length < 4:
        raise BertkitError("--max-length must be at least 4", "e.g. --max-length 128")
    full = tokenizer(text, text_pair, return_offsets_mapping=True)
    encoded = tokenizer(text, text_pair, truncation=True, max_length=max_length, return_offsets_mapping=True)
    return dict(encoded, word_ids=encoded.word_ids(), sequence_ids=encoded.sequence_ids()), len(
        full["input_ids"]
    ) > len(encoded["input_ids"])


def _token_rows(tokenizer, encoded: dict) -> list[dict]:
    pieces = tokenizer.convert_ids_to_tokens(encoded["input_ids"])
    segments = encoded.get("token_type_ids") or [0 if s in (0, None) else 1 for s in encoded["sequence_ids"]]
    return [
        {
            "position": i,
            "token": piece,
            "id": int(token_id),
            "segment": int(segment),
            "word": encoded["word_ids"][i],
            "start": int(start),
            "end": int(end),
        }
        for i, (piece, token_id, segment, (start, end)) in enumerate(
            zip(pieces, encoded["input_ids"], segments, encoded["offset_mapping"])
        )
    ]
