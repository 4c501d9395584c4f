"""HuggingFace baselines for the bertkit benchmarks.

Each function builds its own tokenizer/model from ``model_path`` with a fixed seed, trains with the public
``transformers.Trainer`` the way the official example scripts do by default, and returns a dict of
measurements.  Nothing is saved unless asked; the Trainer's temporary output_dir is removed.

    hf_sst2(...)              run_glue.py style (pad to 128 + default_data_collator); best=True: dynamic
                              padding (DataCollatorWithPadding) + train_sampling_strategy="group_by_length"
    hf_ner(...)               run_ner.py style (first sub-word labelled, DataCollatorForTokenClassification, seqeval)
    hf_qa(...)                run_qa.py style, see benchmarks/hf_qa.py (re-exported here with loop_decode)
    hf_pipeline_predict(...)  transformers.pipeline("text-classification") inference timing
    matmul_peak_gflops(...)   measured fp32 matmul peak, for FLOP-utilisation figures

Smoke test (tiny, ~1-2 min on 2 cores):  python -m benchmarks.baselines --smoke [--isolate]
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any, Sequence

import numpy as np
import torch

from benchmarks._hf_common import (
    CountingCollator,
    Timer,
    current_rss_mb,
    make_trainer,
    peak_rss_mb,
    quiet,
    run_isolated,
    set_threads,
    temp_output_dir,
    throughput_fields,
    training_args,
)
from benchmarks.hf_qa import hf_qa, loop_decode, qa_feature_functions, squad_em_f1  # noqa: F401  (re-exported)

RSS_NOTE = "peak_rss_mb is ru_maxrss of the whole process (max so far), not of this run alone"


def _common_header(task, recipe, n_train, n_eval, epochs, lr, batch_size, seed, threads, best) -> dict[str, Any]:
    return {
        "task": task,
        "recipe": recipe + ("_best" if best else "_default"),
        "best": bool(best),
        "n_train": n_train,
        "n_eval": n_eval,
        "epochs": epochs,
        "lr": lr,
        "batch_size": batch_size,
        "seed": seed,
        "num_threads": threads,
    }


def _finish(out: dict[str, Any], rss_start: float) -> dict[str, Any]:
    out["rss_at_start_mb"] = rss_start
    out["peak_rss_mb"] = peak_rss_mb()
    out["rss_note"] = RSS_NOTE
    return out


# ------------------------------------------------------------------------------------------ SST-2
def hf_sst2(
    train_rows: Sequence[dict],
    eval_rows: Sequence[dict],
    model_path: str,
    *,
    epochs: float = 3.0,
    lr: float = 2e-5,
    batch_size: int = 32,
    seed: int = 42,
    best: bool = False,
    bf16: bool = False,
    max_seq_length: int = 128,
    eval_batch_size: int = 8,
    num_threads: int | None = None,
    save_model_dir: str | None = None,
) -> dict[str, Any]:
    """run_glue.py-style SST-2 fine-tuning with the HF Trainer.

    rows: {"sentence": str, "label": int}.  Default recipe = run_glue defaults: padding="max_length",
    max_length=min(128, model_max_length), truncation=True, default_data_collator.
    best=True: no padding at tokenisation, DataCollatorWithPadding, train_sampling_strategy="group_by_length".
    save_model_dir: if given, the fine-tuned model + tokenizer are saved there after evaluation (e.g. for
    hf_pipeline_predict); the save is not timed.
    """
    quiet()
    threads = set_threads(num_threads)
    rss_start = current_rss_mb()
    from datasets import Dataset
    from transformers import (
        AutoConfig,
        AutoModelForSequenceClassification,
        AutoTokenizer,
        DataCollatorWithPadding,
        default_data_collator,
        set_seed,
    )

    set_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    config = AutoConfig.from_pretrained(model_path, num_labels=2, finetuning_task="sst2")
    model = AutoModelForSequenceClassification.from_pretrained(model_path, config=config)

    max_len = min(max_seq_length, tokenizer.model_max_length)
    padding = False if best else "max_length"

    def preprocess(batch):
        return tokenizer(batch["sentence"], padding=padding, max_length=max_len, truncation=True)

    with Timer() as t_prep:
        train_ds = Dataset.from_list([{"sentence": r["sentence"], "label": int(r["label"])} for r in train_rows])
        eval_ds = Dataset.from_list([{"sentence": r["sentence"], "label": int(r["label"])} for r in eval_rows])
        train_ds = train_ds.map(preprocess, batched=True)
        eval_ds = eval_ds.map(preprocess, batched=True)

    collator = CountingCollator(DataCollatorWithPadding(tokenizer) if best else default_data_collator)
    out = _common_header("sst2", "hf_trainer", len(train_rows), len(eval_rows), epochs, lr, batch_size, seed,
                         threads, best)
    with temp_output_dir() as tmp:
        args = training_args(tmp, epochs=epochs, lr=lr, batch_size=batch_size, seed=seed,
                             eval_batch_size=eval_batch_size, best=best, bf16=bf16)
        trainer = make_trainer(model=model, args=args, train_dataset=train_ds, processing_class=tokenizer,
                          data_collator=collator)
        collator.phase = "train"
        with Timer() as t_train:
            train_result = trainer.train()
        collator.phase = "eval"
        with Timer() as t_eval:
            pred = trainer.predict(eval_ds)
            logits = pred.predictions[0] if isinstance(pred.predictions, tuple) else pred.predictions
            accuracy = float((np.argmax(logits, axis=-1) == np.asarray(pred.label_ids)).mean())
        collator.phase = None
        if save_model_dir:
            trainer.save_model(save_model_dir)

    n_seen = len(train_rows) * epochs
    out.update(
        {
            "prep_seconds": t_prep.seconds,
            "train_seconds": t_train.seconds,
            "train_examples_per_s": n_seen / t_train.seconds,
            "train_steps": train_result.global_step,
            "train_loss": float(train_result.training_loss),
            **throughput_fields("train", collator.get("train"), t_train.seconds, config),
            "eval_accuracy": accuracy,
            "eval_seconds": t_eval.seconds,
            "eval_examples_per_s": len(eval_rows) / t_eval.seconds,
            **throughput_fields("eval", collator.get("eval"), t_eval.seconds),
        }
    )
    return _finish(out, rss_start)


# ------------------------------------------------------------------------------------------ NER
def hf_ner(
    train_sents: Sequence[dict],
    eval_sents: Sequence[dict],
    model_path: str,
    *,
    epochs: float = 3.0,
    lr: float = 5e-5,
    batch_size: int = 32,
    seed: int = 42,
    best: bool = False,
    bf16: bool = False,
    max_seq_length: int | None = None,
    eval_batch_size: int = 8,
    num_threads: int | None = None,
) -> dict[str, Any]:
    """run_ner.py-style token classification with the HF Trainer.

    sents: {"tokens": list[str], "tags": list[str]} (IOB2).  run_ner defaults: is_split_into_words=True,
    truncation at the tokenizer's model_max_length (clipped at 512; override with max_seq_length),
    padding=False + DataCollatorForTokenClassification (dynamic), label_all_tokens=False (first sub-word
    gets the label, the others -100).  Metric: seqeval entity-level micro P/R/F1 (default, non-strict mode,
    as the `evaluate` seqeval metric computes it).  The label list is the sorted set of tags seen in
    train+eval (run_ner sorts the train tags when the column is not a ClassLabel; eval tags are added so a
    tiny train slice cannot miss one).  best=True adds train_sampling_strategy="group_by_length".
    """
    quiet()
    threads = set_threads(num_threads)
    rss_start = current_rss_mb()
    from datasets import Dataset
    from seqeval.metrics import accuracy_score, f1_score, precision_score, recall_score
    from transformers import (
        AutoConfig,
        AutoModelForTokenClassification,
        AutoTokenizer,
        DataCollatorForTokenClassification,
        set_seed,
    )

    label_list = sorted({t for s in train_sents for t in s["tags"]} | {t for s in eval_sents for t in s["tags"]})
    label2id = {l: i for i, l in enumerate(label_list)}
    id2label = {i: l for i, l in enumerate(label_list)}

    set_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    config = AutoConfig.from_pretrained(model_path, num_labels=len(label_list), label2id=label2id, id2label=id2label,
                                        finetuning_task="ner")
    model = AutoModelForTokenClassification.from_pretrained(model_path, config=config)
    max_len = min(tokenizer.model_max_length, 512) if max_seq_length is None else max_seq_length

    def tokenize_and_align_labels(examples):
        tokenized = tokenizer(examples["tokens"], padding=False, truncation=True, max_length=max_len,
                              is_split_into_words=True)
        labels = []
        for i, tags in enumerate(examples["tags"]):
            word_ids = tokenized.word_ids(batch_index=i)
            previous = None
            ids = []
            for w in word_ids:
                if w is None:
                    ids.append(-100)
                elif w != previous:
                    ids.append(label2id[tags[w]])
                else:  # label_all_tokens=False
                    ids.append(-100)
                previous = w
            labels.append(ids)
        tokenized["labels"] = labels
        return tokenized

    with Timer() as t_prep:
        cols = ["tokens", "tags"]
        train_ds = Dataset.from_list([{"tokens": s["tokens"], "tags": s["tags"]} for s in train_sents])
        eval_ds = Dataset.from_list([{"tokens": s["tokens"], "tags": s["tags"]} for s in eval_sents])
        train_ds = train_ds.map(tokenize_and_align_labels, batched=True, remove_columns=cols)
        eval_ds = eval_ds.map(tokenize_and_align_labels, batched=True, remove_columns=cols)

    collator = CountingCollator(DataCollatorForTokenClassification(tokenizer))
    out = _common_header("ner", "hf_trainer", len(train_sents), len(eval_sents), epochs, lr, batch_size, seed,
                         threads, best)
    with temp_output_dir() as tmp:
        args = training_args(tmp, epochs=epochs, lr=lr, batch_size=batch_size, seed=seed,
                             eval_batch_size=eval_batch_size, best=best, bf16=bf16)
        trainer = make_trainer(model=model, args=args, train_dataset=train_ds, processing_class=tokenizer,
                          data_collator=collator)
        collator.phase = "train"
        with Timer() as t_train:
            train_result = trainer.train()
        collator.phase = "eval"
        with Timer() as t_eval:
            pred = trainer.predict(eval_ds)
            preds = np.argmax(pred.predictions, axis=2)
            labels = pred.label_ids
            y_pred = [[id2label[p] for p, l in zip(ps, ls) if l != -100] for ps, ls in zip(preds, labels)]
            y_true = [[id2label[l] for p, l in zip(ps, ls) if l != -100] for ps, ls in zip(preds, labels)]
            metrics = {
                "eval_precision": float(precision_score(y_true, y_pred)),
                "eval_recall": float(recall_score(y_true, y_pred)),
                "eval_f1": float(f1_score(y_true, y_pred)),
                "eval_token_accuracy": float(accuracy_score(y_true, y_pred)),
            }
        collator.phase = None

    n_seen = len(train_sents) * epochs
    out.update(
        {
            "labels": label_list,
            "prep_seconds": t_prep.seconds,
            "train_seconds": t_train.seconds,
            "train_examples_per_s": n_seen / t_train.seconds,
            "train_words_per_s": sum(len(s["tokens"]) for s in train_sents) * epochs / t_train.seconds,
            "train_steps": train_result.global_step,
            "train_loss": float(train_result.training_loss),
            **throughput_fields("train", collator.get("train"), t_train.seconds, config),
            **metrics,
            "eval_seconds": t_eval.seconds,
            "eval_examples_per_s": len(eval_sents) / t_eval.seconds,
            **throughput_fields("eval", collator.get("eval"), t_eval.seconds),
        }
    )
    return _finish(out, rss_start)


# ------------------------------------------------------------------------------------------ pipeline
def hf_pipeline_predict(
    sentences: Sequence[str],
    model_dir: str,
    batch_size: int | None = None,
    *,
    labels: Sequence[int] | None = None,
    num_threads: int | None = None,
) -> dict[str, Any]:
    """Time ``transformers.pipeline("text-classification", model=model_dir, device=-1)`` over all sentences.

    batch_size=None: the pipeline default (one sentence per forward); an int is passed as ``batch_size``.
    If ``labels`` (ints) are given, accuracy is computed via the model's label2id.
    """
    quiet()
    threads = set_threads(num_threads)
    rss_start = current_rss_mb()
    from transformers import pipeline

    sentences = list(sentences)
    with Timer() as t_load:
        pipe = pipeline("text-classification", model=model_dir, device=-1)
    kw = {} if batch_size is None else {"batch_size": batch_size}
    with Timer() as t_pred:
        preds = pipe(sentences, **kw)
    out: dict[str, Any] = {
        "task": "pipeline_text_classification",
        "batch_size": batch_size,
        "num_threads": threads,
        "n_sentences": len(sentences),
        "load_seconds": t_load.seconds,
        "predict_seconds": t_pred.seconds,
        "sentences_per_s": len(sentences) / t_pred.seconds if t_pred.seconds > 0 else float("nan"),
    }
    if labels is not None:
        l2i = pipe.model.config.label2id
        hits = sum(int(l2i[p["label"]] == int(y)) for p, y in zip(preds, labels))
        out["accuracy"] = hits / len(sentences) if sentences else float("nan")
    return _finish(out, rss_start)


# ------------------------------------------------------------------------------------------ matmul peak
def matmul_peak_gflops(seconds: float = 3.0, sizes: Sequence[int] = (1024, 2048), num_threads: int | None = None) -> float:
    """Measured fp32 matmul peak in GFLOP/s: repeated n x n @ n x n (torch, all default threads), best single
    call over ``seconds`` (split across ``sizes``).  Use as the denominator for FLOP utilisation."""
    set_threads(num_threads)
    best = 0.0
    budget = seconds / len(sizes)
    gen = torch.Generator().manual_seed(0)
    for n in sizes:
        a = torch.randn(n, n, generator=gen)
        b = torch.randn(n, n, generator=gen)
        c = torch.empty(n, n)
        torch.matmul(a, b, out=c)  # warm-up
        flop = 2.0 * n**3
        end = time.perf_counter() + budget
        reps = 0
        while time.perf_counter() < end or reps < 3:
            t0 = time.perf_counter()
            torch.matmul(a, b, out=c)
            dt = time.perf_counter() - t0
            best = max(best, flop / dt / 1e9)
            reps += 1
    return best


# ------------------------------------------------------------------------------------------ smoke
def _smoke(rows: int, isolate: bool, epochs: float, batch_size: int) -> dict[str, Any]:
    import tempfile

    from benchmarks.workloads import default_model_path, load_conll, load_squad, load_sst2

    call = (lambda fn, *a, **k: run_isolated(fn, *a, **k)) if isolate else (lambda fn, *a, **k: fn(*a, **k))
    model = default_model_path()
    results: dict[str, Any] = {}
    wall: dict[str, float] = {}

    def timed(name, fn, *a, **k):
        t0 = time.perf_counter()
        results[name] = call(fn, *a, **k)
        wall[name] = time.perf_counter() - t0
        print(f"[smoke] {name}: {wall[name]:.1f}s wall", flush=True)

    t0 = time.perf_counter()
    peak = matmul_peak_gflops(seconds=1.0)
    wall["matmul_peak_gflops"] = time.perf_counter() - t0
    results["matmul_peak_gflops"] = peak
    print(f"[smoke] matmul_peak_gflops: {peak:.1f} GFLOP/s ({wall['matmul_peak_gflops']:.1f}s)", flush=True)

    hp = dict(epochs=epochs, lr=5e-5, batch_size=batch_size, seed=42)
    s_tr, s_ev = load_sst2(rows, rows)
    with tempfile.TemporaryDirectory(prefix="bertkit-smoke-") as mdir:
        timed("hf_sst2_default", hf_sst2, s_tr, s_ev, model, best=False, save_model_dir=mdir, **hp)
        timed("hf_sst2_best", hf_sst2, s_tr, s_ev, model, best=True, **hp)
        sents = [r["sentence"] for r in s_ev]
        labels = [r["label"] for r in s_ev]
        timed("hf_pipeline_bs_none", hf_pipeline_predict, sents, mdir, None, labels=labels)
        timed("hf_pipeline_bs_64", hf_pipeline_predict, sents, mdir, 64, labels=labels)
    c_tr, c_ev = load_conll(rows, rows)
    timed("hf_ner_default", hf_ner, c_tr, c_ev, model, best=False, **hp)
    timed("hf_ner_best", hf_ner, c_tr, c_ev, model, best=True, **hp)
    q_tr, q_ev = load_squad(max(rows // 2, 8), max(rows // 2, 8))
    timed("hf_qa_default", hf_qa, q_tr, q_ev, model, best=False, **hp)
    timed("hf_qa_best", hf_qa, q_tr, q_ev, model, best=True, **hp)

    for name, r in results.items():
        if isinstance(r, dict) and "train_gflops_per_s_est" in r and peak > 0:
            r["train_flop_utilisation_est"] = r["train_gflops_per_s_est"] / peak
    return {"results": results, "smoke_wall_seconds": wall}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="run every baseline on a tiny slice and print the dicts")
    ap.add_argument("--rows", type=int, default=64, help="train/eval rows for the smoke run (QA uses rows//2)")
    ap.add_argument("--epochs", type=float, default=1.0)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--isolate", action="store_true", help="run each baseline in its own process (clean peak RSS)")
    ap.add_argument("--json", help="also write the results to this JSON file")
    a = ap.parse_args(argv)
    if not a.smoke:
        ap.print_help()
        return 2
    res = _smoke(a.rows, a.isolate, a.epochs, a.batch_size)
    text = json.dumps(res, indent=2, default=str)
    print(text)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
