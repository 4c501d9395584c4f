"""`bertkit export head DIR NAME`: one head of a multi-head directory as an ordinary one-task
directory (the shared encoder and that head's layers), which transformers, eval, predict, serve and
export load as any bertkit model."""

from __future__ import annotations

from pathlib import Path

from bertkit.api.multihead_inference import MultiHeadPredictor
from bertkit.model_dir import ModelMeta, check_output_dir, save_model_dir, staged_output
from bertkit.model_dir.writer_lock import writes_outputs
from bertkit.options.multihead import HeadExportOptions


@writes_outputs
def export_head(model_dir: str, name: str, options: HeadExportOptions) -> dict:
    """Write head ``name`` of ``model_dir`` to ``options.output``; returns what its bertkit.json holds."""
    output = Path(options.output).expanduser().resolve()
    check_output_dir(output, options.overwrite)
    predictor = MultiHeadPredictor(model_dir, head=name)
    recorded = predictor.recorded[name]
    predictor.run.precision = "no"  # the weights as trained (fp32), not cast for inference
    from bertkit.networks.multihead import single_model

    model = single_model(predictor.load().model, name)
    meta = predictor.meta
    record = ModelMeta(
        kind="finetune",
        task=recorded["task"],
        base_model=meta["base_model"],
        data=recorded["data"],
        config=meta["config"],
        metrics=recorded.get("metrics") or {},
        methods=["finetune"],
        sections={"exported_from": {"model": str(Path(model_dir).resolve()), "head": name}},
    )
    with staged_output(output) as staging:
        written = save_model_dir(staging, model, predictor.tokenizer, record)
    return {"written_to": str(output), "meta": written}
