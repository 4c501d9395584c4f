"""`bertkit audit`: the training rows whose given label is probably wrong, ranked from out-of-sample
probabilities by cleanlab (bertkit/metrics/label_issues.py), with near-duplicates of another label
and outliers beside them, written as ranked files and as Label Studio tasks to relabel.

The probabilities come from one of three places (bertkit/api/audit_sources.py): ``--folds K``
fine-tunes ``--model`` on K folds of --data here (`finetune --folds`: each row predicted by the fold
that did not train on it; the folds' best model is kept in ``OUTPUT/model``), ``--from RUN_DIR``
reads such a run's out-of-fold file, ``--model DIR`` scores --data with a trained model (rows it did
not train on). One audit is one source: the output directory is written whole (staged), and an
earlier audit there is replaced only with --overwrite, so no directory ever holds two models'
probabilities. ner with --folds scores each sentence with the fold model that held it out (the
folds' models kept for that, then removed)."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

from bertkit.api.audit_check import model_check
from bertkit.api.audit_files import SUMMARY, WRITTEN, ranked_rows, relabel_files, write_audit
from bertkit.api.audit_sources import Scored, checked_rows, from_model, from_run
from bertkit.errors import BertkitError
from bertkit.metrics.label_issues import TOKENS, cleanlab_module, data_issues, label_issues
from bertkit.model_dir import check_inputs_kept, check_output_dir, staged_output
from bertkit.model_dir.ownership import refuse_strangers, strangers
from bertkit.model_dir.removal import claim
from bertkit.model_dir.writer_lock import writes_outputs
from bertkit.options import InferenceOptions, RepeatOptions, RunOptions, TrainConfig
from bertkit.options.audit import AuditOptions

MODEL = "model"  # --folds: the folds' best model, inside the audit's directory


@dataclass
class AuditResult:
    output: str
    rows: int
    flagged: int
    estimated_noise_rate: float
    summary: dict = field(default_factory=dict)
    top: list = field(default_factory=list)  # the first ranked rows


@writes_outputs
def audit(options: AuditOptions, config: TrainConfig | None = None, run: InferenceOptions | None = None) -> AuditResult:
    """Rank ``options.data``'s rows by how likely their label is wrong and write the audit to
    ``options.output``. ``config``: the folds' hyperparameters (with ``options.folds``); ``run``:
    how a trained model scores (batch size, precision, threads)."""
    options = options.validate()
    options.check_settings(config)
    run = (run or InferenceOptions(threads=options.threads)).validate("bertkit audit")
    cleanlab_module("filter")  # installed? said before any work
    output = _checked_output(options)
    if options.folds is not None:  # checked before a fold trains
        checked_rows(options.task, options.data, options.folds, (config or TrainConfig()).max_train_samples)
    with staged_output(output) as staging:
        claim(staging, *WRITTEN, *((f"{MODEL}/",) if options.folds else ()))
        scored = _scored(options, config, run, staging)
        issues = label_issues(scored.kind, scored.given, scored.pred_probs)
        found = _data_issues(scored, run) if options.data_issues else None
        scored = _placed(scored, staging, output)
        rows = ranked_rows(scored, issues, found)
        summary = _summary(scored, issues, found, options)
        write_audit(staging, rows, summary, scored, options.format)
    return AuditResult(str(output), len(rows), summary["flagged"], summary["estimated_noise_rate"], summary, rows[:10])


def _placed(scored: Scored, staging: Path, output: Path) -> Scored:
    """--folds: the kept model's paths as they will be once the staged directory is in place."""

    def moved(value):
        return value.replace(str(staging), str(output)) if isinstance(value, str) else value

    source = {key: moved(value) for key, value in scored.source.items()}
    return dataclasses.replace(scored, model_dir=moved(scored.model_dir), source=source)


def _checked_output(options: AuditOptions) -> Path:
    """The output directory: new, or an earlier audit (only bertkit's files) replaced with --overwrite."""
    output = Path(options.output).expanduser().resolve()
    check_inputs_kept(output, options.data, options.model, options.from_run)
    for directory in (options.model, options.from_run):  # an audit inside a model directory is a stranger to it
        if directory and Path(directory).expanduser().is_dir() and output.is_relative_to(Path(directory).resolve()):
            raise BertkitError(
                f"--output {output} is inside the model directory {directory}", "choose an --output outside it"
            )
    if output.is_dir() and any(output.iterdir()):
        earlier = _earlier_source(output)
        if not options.overwrite:
            what = f"an earlier audit, of {earlier}" if earlier else "files"
            raise BertkitError(
                f"--output {output} holds {what}; one audit directory holds one model's probabilities",
                "choose a new --output, or pass --overwrite to replace that audit",
            )
        if strangers(output):
            refuse_strangers(output, "--overwrite")
        return output
    check_output_dir(output, False)
    return output


def _earlier_source(output: Path) -> str | None:
    try:
        source = json.loads((output / SUMMARY).read_text(encoding="utf-8"))["source"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return source.get("run") or source.get("model") if isinstance(source, dict) else None


def _scored(options: AuditOptions, config, run: InferenceOptions, staging: Path) -> Scored:
    limit = (config or TrainConfig()).max_train_samples  # the rows audited, whatever the source
    if options.from_run is not None:
        return from_run(options.from_run, options.data, limit)
    if options.folds is None:
        return from_model(options.model, options.data, run, limit)
    from bertkit.api.folds import finetune_folds

    model_dir = staging / MODEL
    training = RunOptions(data=options.data, model=options.model, output=str(model_dir), threads=options.threads)
    keep = options.task == "ner"  # each sentence is scored by its own fold's model (see audit_folds)
    result = finetune_folds(options.task, training, config, RepeatOptions(folds=options.folds, keep_all=keep))
    if keep:
        from bertkit.api.audit_folds import scored_by_folds

        return scored_by_folds(result, options.data, run)
    scored = from_run(str(model_dir), options.data, limit)
    return dataclasses.replace(scored, source={**scored.source, "kind": "audit --folds", "model": options.model})


def _data_issues(scored: Scored, run: InferenceOptions) -> dict:
    """Datalab's near-duplicates and outliers on the model's mean-pooled vectors of the rows."""
    from bertkit.api.embedder import Embedder
    from bertkit.options import EmbeddingOptions

    embedder = Embedder(scored.model_dir, EmbeddingOptions(input="-", pooling="mean", threads=run.threads))
    embedder.quiet = True
    embedder.encoder = _encoder_saved_its_own_way(scored)
    if scored.kind == TOKENS:
        texts, pairs = [ex.get("text") or " ".join(ex["tokens"]) for ex in scored.examples], None
    else:
        texts = [ex["text"] for ex in scored.examples]
        pairs = [ex["text_pair"] for ex in scored.examples] if "text_pair" in scored.adapter.text_fields else None
    given = [tuple(g) if isinstance(g, list) else g for g in scored.given]
    return data_issues(embedder.vectors(texts, pairs), given)


def _encoder_saved_its_own_way(scored: Scored):
    """The encoder of a directory whose weights a recorded method saved in its own way (LoRA's
    --save-adapter: adapters over a base model, no model.safetensors), loaded as eval and predict
    load it (bertkit/inference.py: the adapters merged over the base); None: the directory's weights."""
    from bertkit.methods import recorded_methods
    from bertkit.model_dir import load_meta

    meta = load_meta(scored.model_dir)
    if all(method.ordinary_weights(meta) for method in recorded_methods(meta)):
        return None
    from bertkit.inference import trained_model
    from bertkit.models import load_config

    config = load_config(scored.model_dir, scored.model_dir)
    return trained_model(scored.model_dir, scored.adapter.model_class, meta, config).base_model


def _summary(scored: Scored, issues, found: dict | None, options: AuditOptions) -> dict:
    labels = scored.adapter.labels
    flagged_by_class: dict = {}
    for index in issues.flagged.nonzero()[0]:
        given = scored.given[index]
        names = [labels[c] for c in (given if isinstance(given, list) else [given])]
        if scored.kind == TOKENS:
            names = sorted({labels[given[w]] for w in issues.words.get(int(index), [])})
        for name in names:
            flagged_by_class[name] = flagged_by_class.get(name, 0) + 1
    version = cleanlab_module("version").__version__
    check = model_check(scored)
    skipped = (found or {}).get("skipped") or {}
    notices = [f"{name} check skipped: {why}" for name, why in skipped.items()]
    if len(set(skipped.values())) == 1 and len(skipped) > 1:  # one reason for both: said once
        notices = [f"{' and '.join(skipped)} checks skipped: {next(iter(skipped.values()))}"]
    return {
        "warnings": [check["warning"]] if check["warning"] else [],  # first: read before the numbers
        "model_check": {k: v for k, v in check.items() if k != "warning"},
        "rows": len(scored.examples),
        "flagged": int(issues.flagged.sum()),
        "flagged_by_given_label": dict(sorted(flagged_by_class.items())),
        "estimated_noise_rate": round(issues.noise_rate, 6),
        "noise_rate_of": "words" if scored.kind == TOKENS else "rows",
        "joint": {"labels": labels, "given_by_true": issues.joint},
        "label_kind": scored.kind if scored.kind == TOKENS else scored.adapter.kind.name,  # cls/pair: --problem-type
        "near_duplicates_with_other_labels": _count(found, "near_duplicates"),
        "outliers": _count(found, "outliers"),
        "data_checks_skipped": skipped,
        "notices": notices,
        "method": f"cleanlab {version}: confident learning (find_label_issues, get_label_quality_scores)",
        "data": options.data,
        "relabel": list(relabel_files(options.format)),
        "source": scored.source,
    }


def _count(found: dict | None, key: str) -> int | None:
    """None: the check was not asked for (--no-data-issues) or was skipped (``data_checks_skipped``)."""
    return None if found is None or found[key] is None else len(found[key])
