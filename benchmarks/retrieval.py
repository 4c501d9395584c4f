"""SQuAD retrieval side by side: `bertkit finetune embedding` (MNRL) and `bertkit finetune rerank`
(BCE) against sentence-transformers' SentenceTransformerTrainer (MultipleNegativesRankingLoss) and
CrossEncoderTrainer (BinaryCrossEntropyLoss), on the same model (the bundled MiniLM), rows, batch
size, lr, epochs, warmup, weight decay, max length and seed; every model scored by ONE scorer,
bertkit's `evaluate_retrieval` (trec_eval's measures), on the held-out test articles, at one
precision for all (``--eval-precision``, default auto: bf16 where the CPU has it, which halves the
search time of 2,067 passages that every row pays).

* The set: `build_squad_retrieval` on $BERTKIT_DATA_DIR/squad/dev-v1.1.json into the work directory
  (corpus 2,067 paragraphs; test: 1,988 questions of the last 10 articles, never trained on).
* Embedding: the first ``--train-pairs`` rows of train-pairs.jsonl (question, its paragraph).
  sentence-transformers samples batches with its NO_DUPLICATES sampler (what its docs recommend for
  MNRL; ``--st-sampler batch_sampler``: plain shuffled batches); bertkit masks a duplicate text out
  of a row's negatives instead (README). NO_DUPLICATES defers a row whose text is already in the
  batch, so its last batches of an epoch can be smaller; the trainer still stops after
  ceil(rows / batch) steps, as bertkit does (the steps of both are in the JSON). With very few
  distinct paragraphs (a tiny ``--train-pairs``) its batches are much smaller than bertkit's.
* Reranker rows: the first ``--rerank-queries`` train questions, each with its paragraph (label 1)
  and ``--negatives`` hard negatives mined by zero-shot MiniLM (`bertkit.api.mining.mine`, its
  defaults but ``--negatives``) from the train articles' paragraphs only (label 0). Both rerankers
  rescore the top 20 and top 100 of the bertkit-trained retriever on the first
  ``--rerank-eval-queries`` test questions (a sub-BEIR directory with only their qrels); the
  retriever alone is scored on that subset too.
* Wall time: bertkit's is the whole `python -m bertkit finetune ...` process (start-up, reading,
  model load, training, the directory written); sentence-transformers' is ``trainer.train()`` plus
  ``save_pretrained`` (its whole worker process is recorded too). Each training runs alone in its own
  process, sequentially, with ``--threads`` torch threads, fp32 on both by default (bertkit
  ``--precision no``), or each side's bf16 (``--precision bf16 --st-precision bf16``: bertkit's bf16
  weights with fp32 master weights, the Trainer's CPU autocast); the load average is recorded.
* ``--extra-seeds 43,44``: MNRL on both sides again with those seeds (after the rest), for the spread;
  ``--rerank-seeds 43,44``: the same for the rerankers (same rows, rescoring the seed-42 retriever);
  ``--skip-rerank``: the embedding models only.

    flock /tmp/heavy.lock python -m benchmarks.retrieval [--train-pairs 4000] [--rerank-queries 1000]
        [--rerank-eval-queries 300] [--epochs 1] [--batch-size 32] [--lr 2e-5] [--seed 42]

Writes benchmarks/results/retrieval.{json,md}. ``--test-queries N`` scores only the first N test
questions (a quick check that the script runs; the table is then not the benchmark's).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.side_by_side import write_results

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
WARMUP, WEIGHT_DECAY = 0.1, 0.01  # bertkit's defaults, given to sentence-transformers too
MEASURES = ("ndcg@10", "mrr@10", "recall@10", "recall@100")


def data_dir() -> Path:
    return Path(os.environ.get("BERTKIT_DATA_DIR", REPO.parent / "shared" / "data")).resolve()


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return path


def read_qrels(path: Path) -> list[tuple[str, str, str]]:
    return [tuple(line.split("\t")) for line in path.read_text(encoding="utf-8").splitlines()[1:] if line.strip()]


def sub_beir(beir: Path, split: str, queries: int, out: Path) -> Path:
    """A BEIR directory with the whole corpus but only the first ``queries`` judged queries of
    ``split`` (qrels order): evaluate_retrieval scores every judged query of a split."""
    qrels = read_qrels(beir / "qrels" / f"{split}.tsv")
    kept = list(dict.fromkeys(q for q, _, _ in qrels))[:queries]
    wanted = set(kept)
    (out / "qrels").mkdir(parents=True)
    for name in ("corpus.jsonl", "queries.jsonl"):
        (out / name).write_bytes((beir / name).read_bytes())
    lines = ["query-id\tcorpus-id\tscore"] + ["\t".join(row) for row in qrels if row[0] in wanted]
    (out / "qrels" / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


def train_corpus(beir: Path, out: Path) -> Path:
    """The train articles' paragraphs (those judged in qrels/train.tsv): negatives are mined there,
    so no test paragraph is ever seen in training."""
    judged = {p for _, p, _ in read_qrels(beir / "qrels" / "train.tsv")}
    return write_jsonl(out, (row for row in read_jsonl(beir / "corpus.jsonl") if row["_id"] in judged))


def rerank_rows(work: Path, beir: Path, args) -> tuple[Path, dict]:
    """(query, passage, label) rows: each of the first ``--rerank-queries`` train questions with its
    paragraph (1) and the ``--negatives`` hard negatives the zero-shot model mines for it (0)."""
    from bertkit.api.mining import mine
    from bertkit.data.beir import corpus_rows
    from bertkit.options.retrieval import MineOptions

    pairs = write_jsonl(work / "rerank-pairs.jsonl", read_jsonl(beir / "train-pairs.jsonl")[: args.rerank_queries])
    corpus = train_corpus(beir, work / "train-corpus.jsonl")
    triplets = str(work / "triplets.jsonl")
    settings = MineOptions(
        str(pairs), str(corpus), triplets, negatives=args.negatives, threads=args.threads, precision="no"
    )
    mined = mine(args.model, settings)
    texts = dict(corpus_rows(corpus))
    assert all(row["positive"] in texts.values() for row in read_jsonl(pairs)), "a positive is not a passage"
    rows, seen = [], set()
    for triplet in read_jsonl(work / "triplets.jsonl"):
        query, positive = triplet["anchor"], triplet["positive"]
        if (query, positive) not in seen:  # the positive once per pair (a question may be asked twice)
            seen.add((query, positive))
            rows.append({"query": query, "passage": positive, "label": 1})
        rows.append({"query": query, "passage": triplet["negative"], "label": 0})
    facts = {"pairs": len(seen), "rows": len(rows), "negatives": len(rows) - len(seen)}
    facts["mined"] = {k: v for k, v in vars(mined).items() if isinstance(v, (int, float, str, dict))}
    return write_jsonl(work / "rerank-rows.jsonl", rows), facts


def child_env() -> dict:
    """This environment with the repository first on the import path (any PYTHONPATH kept after it)."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}


def bertkit_train(task: str, data: Path, out: Path, args) -> dict:
    """The whole `python -m bertkit finetune TASK` process, timed from outside."""
    command = [sys.executable, "-m", "bertkit", "finetune", task, "--data", str(data), "--model", args.model]
    command += ["--output", str(out), "--overwrite", "--epochs", str(args.epochs), "--batch-size", str(args.batch_size)]
    command += ["--lr", str(args.lr), "--seed", str(args.seed), "--max-length", str(args.max_length)]
    command += ["--warmup-ratio", str(WARMUP), "--weight-decay", str(WEIGHT_DECAY)]
    command += ["--precision", "bf16" if args.precision == "bf16" else "no"]
    command += ["--threads", str(args.threads)]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, env=child_env(), capture_output=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"bertkit finetune {task} failed:\n{done.stderr.decode(errors='replace')[-3000:]}")
    throughput = json.loads((out / "bertkit.json").read_text())["throughput"]
    return {
        "train_s": round(wall, 2),
        "loop_s": throughput.get("train_seconds"),
        "steps": throughput.get("optimizer_steps"),
        "load_average": os.getloadavg()[0],
    }


def st_train(kind: str, data: Path, out: Path, args) -> dict:
    """A sentence-transformers training in its own process (this file, ``--worker``)."""
    spec = {"kind": kind, "data": str(data), "out": str(out), **{k: v for k, v in vars(args).items() if k != "work"}}
    command = [sys.executable, "-m", "benchmarks.retrieval", "--worker", json.dumps(spec)]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, env=child_env(), capture_output=True)
    process = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"sentence-transformers {kind} failed:\n{done.stderr.decode(errors='replace')[-3000:]}")
    timed = json.loads(done.stdout.decode().strip().splitlines()[-1])
    return {**timed, "process_s": round(process, 2), "load_average": os.getloadavg()[0]}


def worker(spec: dict) -> None:
    """Train with sentence-transformers' trainer; print {"train_s", "steps"} (train() + save)."""
    import torch
    from datasets import Dataset
    from sentence_transformers import (
        CrossEncoder,
        CrossEncoderTrainer,
        CrossEncoderTrainingArguments,
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.base.sampler import BatchSamplers

    from bertkit.models import resolve_model

    torch.set_num_threads(spec["threads"])
    rows = read_jsonl(Path(spec["data"]))
    common = dict(
        output_dir=tempfile.mkdtemp(prefix="st-bench-"),
        num_train_epochs=spec["epochs"],
        per_device_train_batch_size=spec["batch_size"],
        learning_rate=spec["lr"],
        warmup_steps=WARMUP,  # transformers 5: a float below 1 is a ratio of the steps
        weight_decay=WEIGHT_DECAY,
        seed=spec["seed"],
        save_strategy="no",
        report_to="none",
        logging_steps=10_000,
        disable_tqdm=True,
        use_cpu=not torch.cuda.is_available(),
        bf16=spec["st_precision"] == "bf16",  # the Trainer's autocast (its weights stay fp32)
    )
    path = resolve_model(spec["model"])
    if spec["kind"] == "mnrl":
        from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

        model = SentenceTransformer(str(path), device="cpu" if common["use_cpu"] else None)
        model.max_seq_length = spec["max_length"]
        dataset = Dataset.from_dict({"anchor": [r["anchor"] for r in rows], "positive": [r["positive"] for r in rows]})
        sampler = BatchSamplers.NO_DUPLICATES if spec["st_sampler"] == "no_duplicates" else BatchSamplers.BATCH_SAMPLER
        arguments = SentenceTransformerTrainingArguments(**common, batch_sampler=sampler)
        trainer = SentenceTransformerTrainer(
            model=model, args=arguments, train_dataset=dataset, loss=MultipleNegativesRankingLoss(model)
        )
    else:
        from sentence_transformers.cross_encoder.losses import BinaryCrossEntropyLoss

        model = CrossEncoder(str(path), num_labels=1, max_length=spec["max_length"])
        columns = {name: [r[name] for r in rows] for name in ("query", "passage")}
        dataset = Dataset.from_dict({**columns, "label": [float(r["label"]) for r in rows]})
        arguments = CrossEncoderTrainingArguments(**common)
        loss = BinaryCrossEntropyLoss(model)
        trainer = CrossEncoderTrainer(model=model, args=arguments, train_dataset=dataset, loss=loss)
    started = time.perf_counter()
    trainer.train()
    model.save_pretrained(spec["out"])
    wall = time.perf_counter() - started
    print(json.dumps({"train_s": round(wall, 2), "steps": trainer.state.global_step}))


def scored(model: Path | str, beir: Path, out: Path, args, rerank: Path | None = None, top: int = 100) -> dict:
    """bertkit's evaluate_retrieval on the split ``test``: the measures, and the retriever's alone."""
    from bertkit.api.retrieval import evaluate_retrieval
    from bertkit.options import EvalOptions, InferenceOptions
    from bertkit.options.retrieval import RetrievalOptions

    report = evaluate_retrieval(
        str(model),
        EvalOptions(data=str(beir), split="test", output=str(out)),
        RetrievalOptions(rerank=str(rerank) if rerank else None, rerank_top=top),
        InferenceOptions(precision=args.eval_precision, threads=args.threads),
    )
    kept = {"metrics": {m: report["metrics"][m] for m in MEASURES}, "queries": report["queries"]}
    kept["timings"] = report["timings"]
    if rerank:
        kept["retriever_metrics"] = {m: report["retriever_metrics"][m] for m in MEASURES}
    return kept


def st_cross_check(model: Path, beir: Path, threads: int) -> dict:
    """sentence-transformers' InformationRetrievalEvaluator on the same queries and corpus (its own
    truncation: the model's max_seq_length)."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.evaluation import InformationRetrievalEvaluator

    from bertkit.data.beir import corpus_rows

    torch.set_num_threads(threads)
    qrels = read_qrels(beir / "qrels" / "test.tsv")
    judged = {q for q, _, _ in qrels}
    queries = {row["_id"]: row["text"] for row in read_jsonl(beir / "queries.jsonl") if row["_id"] in judged}
    relevant: dict[str, set] = {}
    for query, passage, grade in qrels:
        if int(grade) > 0:
            relevant.setdefault(query, set()).add(passage)
    evaluator = InformationRetrievalEvaluator(
        queries, dict(corpus_rows(beir / "corpus.jsonl")), relevant, mrr_at_k=[10], ndcg_at_k=[10],
        accuracy_at_k=[1], precision_recall_at_k=[10, 100], map_at_k=[100], show_progress_bar=False, name="squad",
    )  # fmt: skip
    found = evaluator(SentenceTransformer(str(model), device="cpu"))
    return {
        "ndcg@10": found["squad_cosine_ndcg@10"],
        "mrr@10": found["squad_cosine_mrr@10"],
        "recall@10": found["squad_cosine_recall@10"],
        "recall@100": found["squad_cosine_recall@100"],
    }


def run(args, work: Path) -> dict:
    # long: the benchmark's steps in order, each result kept as it comes
    from bertkit.api.datasets import build_squad_retrieval

    beir = work / "squad-retrieval"
    build_squad_retrieval(str(data_dir() / "squad" / "dev-v1.1.json"), str(beir))
    test = sub_beir(beir, "test", args.test_queries, work / "test-beir") if args.test_queries else beir
    pairs = write_jsonl(work / "pairs.jsonl", read_jsonl(beir / "train-pairs.jsonl")[: args.train_pairs])
    record: dict = {"rows": {"train_pairs": len(read_jsonl(pairs))}, "trainings": {}, "scores": {}}

    def step(name: str, value: dict, table: str) -> None:
        record[table][name] = value
        print(json.dumps({name: value}), flush=True)

    step("zero-shot", scored(args.model, test, work / "eval-zero.json", args), "scores")
    step("mnrl bertkit", bertkit_train("embedding", pairs, work / "bk-mnrl", args), "trainings")
    step("mnrl st", st_train("mnrl", pairs, work / "st-mnrl", args), "trainings")
    step("mnrl bertkit", scored(work / "bk-mnrl", test, work / "eval-bk-mnrl.json", args), "scores")
    step("mnrl st", scored(work / "st-mnrl", test, work / "eval-st-mnrl.json", args), "scores")
    if args.cross_check:
        record["st_evaluator_mnrl_st"] = st_cross_check(work / "st-mnrl", test, args.threads)
        print(json.dumps({"st evaluator (mnrl st)": record["st_evaluator_mnrl_st"]}), flush=True)

    if not args.skip_rerank:
        rerank(args, work, beir, record, step)
    for seed in args.extra_seeds:  # MNRL again on other seeds: the spread of both sides
        again = argparse.Namespace(**{**vars(args), "seed": seed})
        for side, train in (("bertkit", bertkit_train), ("st", st_train)):
            name, out = f"mnrl {side} seed {seed}", work / f"{side}-mnrl-{seed}"
            step(name, train("embedding" if side == "bertkit" else "mnrl", pairs, out, again), "trainings")
            step(name, scored(out, test, work / f"eval-{side}-mnrl-{seed}.json", args), "scores")
    return record


def rerank(args, work: Path, beir: Path, record: dict, step) -> None:
    """Both rerankers on rows mined from the train articles, rescoring the bertkit retriever's top
    20 and top 100 of the first test questions; ``--rerank-seeds`` again on other seeds."""
    rows, record["rows"]["rerank"] = rerank_rows(work, beir, args)
    step("rerank bertkit", bertkit_train("rerank", rows, work / "bk-rerank", args), "trainings")
    step("rerank st", st_train("rerank", rows, work / "st-rerank", args), "trainings")
    subset = sub_beir(beir, "test", args.rerank_eval_queries, work / "rerank-beir")
    for top in (20, 100):
        for side, reranker in (("bertkit", work / "bk-rerank"), ("st", work / "st-rerank")):
            name = f"rerank top{top} {side}"
            target = work / f"eval-{side}-{top}.json"
            step(name, scored(work / "bk-mnrl", subset, target, args, reranker, top), "scores")
    record["scores"]["retriever on the rerank subset"] = {"metrics": record["scores"][name]["retriever_metrics"]}
    for seed in args.rerank_seeds:  # the rerankers again on other seeds, over the same retriever
        again = argparse.Namespace(**{**vars(args), "seed": seed})
        for side, train in (("bertkit", bertkit_train), ("st", st_train)):
            out = work / f"{side}-rerank-{seed}"
            step(f"rerank {side} seed {seed}", train("rerank", rows, out, again), "trainings")
            for top in (20, 100):
                target = work / f"eval-{side}-{top}-{seed}.json"
                step(
                    f"rerank top{top} {side} seed {seed}",
                    scored(work / "bk-mnrl", subset, target, args, out, top),
                    "scores",
                )


RERANK_SETTINGS = ("rerank questions", "negatives", "rerank seeds")

TABLE_ROWS = (
    ("zero-shot", None),
    ("mnrl bertkit", "mnrl"),
    ("mnrl st", "mnrl"),
    ("retriever on the rerank subset", None),
    ("rerank top20 bertkit", "rerank"),
    ("rerank top20 st", "rerank"),
    ("rerank top100 bertkit", "rerank"),
    ("rerank top100 st", "rerank"),
)


def seed_table(record: dict, kind: str = "mnrl", scores: str = "mnrl", extra: str = "extra seeds") -> list[str]:
    """``kind`` per seed (the main run's and ``--extra-seeds``' or ``--rerank-seeds``'): nDCG@10 of
    the ``scores`` rows, mean ± std, time ratios."""
    import statistics

    seeds = [record["settings"]["seed"], *record["settings"].get(extra, [])]
    if len(seeds) < 2:
        return []
    lines = ["", f"{scores} per seed (nDCG@10; training s as above):", ""]
    lines += ["| seed | bertkit | ST | bertkit s | ST s | ST/bertkit time |", "|---|---|---|---|---|---|"]
    found = {"bertkit": [], "st": []}
    for seed in seeds:
        tail = "" if seed == seeds[0] else f" seed {seed}"
        cells = {side: (record["scores"].get(f"{scores} {side}{tail}"), record["trainings"].get(f"{kind} {side}{tail}"))
                 for side in found}  # fmt: skip
        if any(score is None or time is None for score, time in cells.values()):
            continue
        for side, (score, _) in cells.items():
            found[side].append(score["metrics"]["ndcg@10"])
        (ours, our_time), (theirs, their_time) = cells["bertkit"], cells["st"]
        lines.append(
            f"| {seed} | {ours['metrics']['ndcg@10']:.4f} | {theirs['metrics']['ndcg@10']:.4f} | "
            f"{our_time['train_s']:.1f} | {their_time['train_s']:.1f} | "
            f"{their_time['train_s'] / our_time['train_s']:.2f}x |"
        )
    if len(found["st"]) > 1:
        mean = {side: (statistics.mean(v), statistics.stdev(v)) for side, v in found.items()}
        lines.append(
            f"| mean ± std | {mean['bertkit'][0]:.4f} ± {mean['bertkit'][1]:.4f} | "
            f"{mean['st'][0]:.4f} ± {mean['st'][1]:.4f} | | | |"
        )
    return lines


def markdown(record: dict) -> str:
    settings = record["settings"]
    lines = [
        "# SQuAD retrieval (test articles): bertkit against sentence-transformers' trainers",
        "",
        "Settings: " + ", ".join(f"{k} {v}" for k, v in settings.items()),
        "",
        "| row | queries | nDCG@10 | MRR@10 | R@10 | R@100 | training s | bertkit/ST | process s | bertkit/ST "
        "| steps |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    trainings = record["trainings"]
    for name, kind in TABLE_ROWS:
        score = record["scores"].get(name)
        if score is None:
            continue
        measures = " | ".join(f"{score['metrics'][m]:.4f}" for m in MEASURES)
        queries = score.get("queries") or record["scores"]["rerank top20 bertkit"]["queries"]
        times = " | | | |"
        if kind:
            ours, theirs = trainings[f"{kind} bertkit"], trainings[f"{kind} st"]
            mine = ours if name.endswith("bertkit") else theirs
            process = mine.get("process_s", mine["train_s"])  # bertkit's training time is its whole process
            times = (
                f" {mine['train_s']:.1f} | {ours['train_s'] / theirs['train_s']:.2f}x | {process:.1f} | "
                f"{ours['train_s'] / theirs['process_s']:.2f}x | {mine['steps']}"
            )
        lines.append(f"| {name} | {queries} | {measures} |{times} |")
    lines += seed_table(record)
    for top in (20, 100):
        lines += seed_table(record, "rerank", f"rerank top{top}", "rerank seeds")
    if "st_evaluator_mnrl_st" in record:
        check = record["st_evaluator_mnrl_st"]
        lines += ["", "sentence-transformers' InformationRetrievalEvaluator on `mnrl st`: "]
        lines[-1] += ", ".join(f"{m} {check[m]:.4f}" for m in MEASURES)
    lines += [
        "",
        "Training s: bertkit's whole `finetune` process (start-up, reading, model load, training, the "
        "directory written; its training loop alone is `loop_s` in the JSON); sentence-transformers' "
        "train() + save_pretrained. Process s: each side's whole process. Reranked rows: the bertkit-trained "
        "retriever's top N rescored, so R@100 after top 20 is R@20.",
    ]
    return "\n".join(lines) + "\n"


def seed_list(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--train-pairs", type=int, default=4000)
    parser.add_argument("--rerank-queries", type=int, default=1000)
    parser.add_argument("--rerank-eval-queries", type=int, default=300)
    parser.add_argument("--negatives", type=int, default=3, help="hard negatives per reranker question")
    parser.add_argument("--test-queries", type=int, default=0, help="only the first N test questions (0: all)")
    parser.add_argument("--epochs", type=float, default=1)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=2e-5)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--max-length", type=int, default=256, help="training tokens per text (pair for rerank)")
    parser.add_argument(
        "--extra-seeds", type=seed_list, default=[],
        help="MNRL (both sides) again on these seeds, after the rest: the spread, e.g. 43,44",
    )  # fmt: skip
    parser.add_argument(
        "--rerank-seeds", type=seed_list, default=[],
        help="both rerankers again on these seeds (same rows, same retriever): their spread, e.g. 43,44",
    )  # fmt: skip
    parser.add_argument("--skip-rerank", action="store_true", help="train and score the embedding models only")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--eval-precision", default="auto", help="the scorer's, one for every model (auto: bf16 where the CPU has it)"
    )
    parser.add_argument(
        "--precision",
        choices=("fp32", "bf16"),
        default="fp32",
        help="bertkit's training precision (bf16: --precision bf16)",
    )
    parser.add_argument(
        "--st-precision",
        choices=("fp32", "bf16"),
        default="fp32",
        help="sentence-transformers' (bf16: the Trainer's autocast)",
    )
    parser.add_argument("--model", default="minilm")
    parser.add_argument(
        "--st-sampler",
        choices=("no_duplicates", "batch_sampler"),
        default="no_duplicates",
        help="sentence-transformers' batch sampler for MNRL (its docs recommend no_duplicates)",
    )
    parser.add_argument("--cross-check", action="store_true", help="also InformationRetrievalEvaluator on ST's model")
    parser.add_argument("--work", default=None, help="a new directory for the models and runs (default: temporary)")
    parser.add_argument("--name", default="retrieval")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(json.loads(args.worker))
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="retrieval-bench-") as temporary:
        work = Path(args.work or temporary)
        if args.work and work.exists() and any(work.iterdir()):
            raise SystemExit(f"--work {work} is not empty: give a new directory")
        work.mkdir(parents=True, exist_ok=True)
        record = run(args, work)
    record["settings"] = {
        "model": args.model,
        "train pairs": args.train_pairs,
        "rerank questions": args.rerank_queries,
        "negatives": args.negatives,
        "epochs": args.epochs,
        "batch": args.batch_size,
        "lr": args.lr,
        "warmup ratio": WARMUP,
        "weight decay": WEIGHT_DECAY,
        "max length": args.max_length,
        "seed": args.seed,
        "extra seeds": args.extra_seeds,
        "rerank seeds": args.rerank_seeds,
        "precision": f"bertkit {args.precision}, sentence-transformers {args.st_precision}",
        "scoring precision": args.eval_precision,
        "threads": args.threads,
        "ST MNRL sampler": args.st_sampler,
    }
    if args.skip_rerank:  # no reranker was trained: its settings would describe nothing
        record["settings"] = {k: v for k, v in record["settings"].items() if k not in RERANK_SETTINGS}
        record["settings"]["rerankers"] = "skipped"
    print(write_results(record, args.name, markdown, started))


if __name__ == "__main__":
    main()
