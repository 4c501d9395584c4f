"""`bertkit eval MODEL --data BEIR_DIR`: dense retrieval scored as trec_eval scores it.

The retriever is any model `bertkit embed` takes (pooled as embed pools). The queries are embedded
once; the corpus is read and embedded ONCE, ``corpus_chunk`` passages at a time, each chunk's
scores folded into a running top-k per query (bertkit.decoding.ranking), so memory holds the
queries' vectors and (queries x k) scores, never the corpus's vectors nor the whole score matrix.
``--rerank`` rescores each query's top ``rerank_top`` with a cross-encoder (bertkit.api.reranker);
the run then holds those passages in the reranker's order (as BEIR's reranking does).

Everything is checked before a model loads: the BEIR files against each other, the outputs (the
metrics JSON and the run file named after it beside it: ``eval-<data>-<split>.json`` and
``run-<data>-<split>.trec`` in the model's directory, ``--output scores.json`` and
``run-scores.trec``; neither written over a file bertkit did not write for this model), the
reranker's config.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np

from bertkit.api.embedder import Embedder
from bertkit.api.streaming import check_model_kept
from bertkit.data.beir import Beir, corpus_rows, read_beir, run_lines, score_text
from bertkit.errors import BertkitError
from bertkit.events import notice
from bertkit.metrics.retrieval import MAIN, ranked, retrieval_metrics
from bertkit.model_dir import atomic_file, check_inputs_kept, check_output_file, write_json
from bertkit.model_dir.ownership import check_results_kept, results_record
from bertkit.options import EmbeddingOptions, EvalOptions, InferenceOptions
from bertkit.options.retrieval import RETRIEVED, RetrievalOptions
from bertkit.training.results import run_file as run_file_of

RUN_TAG = "bertkit"


def evaluate_retrieval(
    model: str,
    options: EvalOptions,
    retrieval: RetrievalOptions | None = None,
    run: InferenceOptions | None = None,
) -> dict:
    """Search the judged queries of ``options.data`` (a BEIR directory; ``options.split``, default
    test) over its corpus, score the run, write the run file and the metrics JSON (``options.output``);
    returns the report (``metrics``; with a reranker also ``retriever_metrics``). EvalOptions' other
    settings (a task's, a Hub dataset's, --max-eval-samples...) mean nothing here and are refused."""
    run = (run or InferenceOptions()).validate("bertkit eval")
    options = options.validate("bertkit eval")
    retrieval = (retrieval or RetrievalOptions()).validate("bertkit eval")
    _refuse_other_options(options)
    split = options.split or "test"
    beir = read_beir(options.data, split)
    target, run_file = _outputs(model, beir, options.output, retrieval.rerank)
    reranker = _reranker(retrieval.rerank, run)
    embedder = Embedder(model, embedding_options(retrieval.max_length, run))
    rerank_top, similarity = retrieval.rerank_top, retrieval.similarity
    started = time.perf_counter()
    retrieved = search(
        embedder,
        list(beir.queries.values()),
        beir.corpus_path,
        max(RETRIEVED, rerank_top),
        similarity,
        retrieval.corpus_chunk,
    )
    searched = time.perf_counter()
    ranking = as_run(beir, *retrieved)
    report = {"model": str(model), "data": str(beir.directory), "split": split, "queries": len(beir.queries)}
    report.update(corpus=len(beir.corpus_ids), similarity=similarity, notices=[])
    if reranker is not None:
        report["retriever_metrics"] = _measured(beir, ranking)
        ranking = rerank_run(reranker, beir, ranking, rerank_top)
        report["rerank"] = {"model": str(retrieval.rerank), "top": rerank_top}
    report["metrics"] = _measured(beir, ranking)
    report["main_metric"] = MAIN
    report["timings"] = {"search_seconds": round(searched - started, 3)}
    report["timings"]["rerank_seconds"] = round(time.perf_counter() - searched, 3) if reranker else 0.0
    report["runtime"] = embedder.engine.runtime(run.precision)
    if embedder.engine.is_main_process:
        with atomic_file(run_file) as handle:
            handle.writelines(run_lines(ranking, RUN_TAG))
        report["run_written_to"] = str(run_file)
        report["outputs"] = results_record(model, run_file)  # whose, for the next eval into this file
        write_json(target, report)
    report["written_to"] = str(target)
    return report


def _outputs(model: str, beir: Beir, output: str | None, rerank: str | None) -> tuple[Path, Path]:
    """The metrics JSON (``--output``, else ``eval-<data>-<split>.json`` in the model's directory)
    and the run file named after it (``run-<its name>.trec``), both checked: writable, no input, no
    model file, nothing bertkit did not write for this model (model_dir.ownership)."""
    name = f"{beir.directory.resolve().name}-{beir.split}"
    if output is None and not Path(model).expanduser().is_dir():
        raise BertkitError(f"{model} is not a local directory to write the scores into", "give --output FILE.json")
    target = check_output_file(Path(output) if output else Path(model).expanduser() / f"eval-{name}.json")
    run_file = check_output_file(run_file_of(target), "the run file")
    inputs = [beir.directory / "corpus.jsonl", beir.directory / "queries.jsonl", beir.directory / "qrels"]
    for written, flag in ((target, "--output"), (run_file, "the run file")):
        check_inputs_kept(written, *inputs, flag=flag)
        for used in filter(None, (model, rerank)):
            check_model_kept(written, used, flag)
    check_results_kept(model, target, "--output" if output else "the metrics file", {run_file: "the run file"})
    return target, run_file


def _refuse_other_options(options: EvalOptions) -> None:
    """A task's and a Hub dataset's flags mean nothing to a BEIR directory: said, not ignored."""
    given = [f"--{name.replace('_', '-')}" for name in options.task_options]
    dataset = options.dataset
    given += [f"--{f.name.replace('_', '-')}" for f in dataclasses.fields(dataset) if getattr(dataset, f.name)]
    others = (
        ("--max-eval-samples", options.max_eval_samples),
        ("--metric", options.metric),
        ("--store-threshold", options.store_threshold),
    )
    given += [flag for flag, value in others if value is not None and value != []]
    if given:
        raise BertkitError(f"{', '.join(given)}: not for retrieval on a BEIR directory", f"drop {given[0]}")


def embedding_options(max_length: int, run) -> EmbeddingOptions:
    """How retrieval and mining embed: embed's defaults (pooling, no normalising) with their window
    and ``run``'s batch size, precision and threads (InferenceOptions, MineOptions)."""
    return EmbeddingOptions(
        max_length=max_length, batch_size=run.batch_size, precision=run.precision, threads=run.threads
    )


def _reranker(rerank: str | None, run: InferenceOptions):
    if rerank is None:
        return None
    from bertkit.api.reranker import Reranker

    return Reranker(rerank, run).check()  # its config, before any weights load


def search(
    embedder: Embedder, queries: list[str], corpus: Path, k: int, similarity: str, corpus_chunk: int
) -> tuple[np.ndarray, np.ndarray]:
    """(positions, scores), each (queries, min(k, passages)), best first: the corpus read and
    embedded once, ``corpus_chunk`` passages at a time."""
    cosine = similarity == "cosine"
    return search_vectors(embedder, scaled(embedder.vectors(queries), cosine), corpus, k, cosine, corpus_chunk)


def search_vectors(
    embedder: Embedder, query_vectors: np.ndarray, corpus: Path, k: int, cosine: bool, corpus_chunk: int
) -> tuple[np.ndarray, np.ndarray]:
    """``search`` from the queries' vectors (already scaled for cosine)."""
    from bertkit.decoding.ranking import RunningTopK

    top = RunningTopK(len(query_vectors), k)
    for texts in _chunks((text for _, text in corpus_rows(corpus)), corpus_chunk):
        top.add(query_vectors @ scaled(embedder.vectors(texts), cosine).T)
        notice("progress", f"corpus: {top.seen} passages embedded and searched", passages=top.seen)
    return top.result()


def scaled(vectors: np.ndarray, cosine: bool) -> np.ndarray:
    if not cosine:
        return vectors
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)


def _chunks(items, size: int):
    chunk = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def as_run(beir: Beir, positions: np.ndarray, scores: np.ndarray) -> dict[str, dict[str, float]]:
    """query id -> passage id -> score as the run file spells it (so the file ranks as scored)."""
    return {
        query: {beir.corpus_ids[p]: float(score_text(s)) for p, s in zip(positions[row], scores[row])}
        for row, query in enumerate(beir.queries)
    }


def rerank_run(reranker, beir: Beir, run: dict, top: int) -> dict[str, dict[str, float]]:
    """Each query's first ``top`` passages rescored by the reranker (the rest dropped)."""
    kept = {query: [p for p, _ in ranked(scores)[:top]] for query, scores in run.items()}
    wanted = {p for passages in kept.values() for p in passages}
    texts = {pid: text for pid, text in corpus_rows(beir.corpus_path) if pid in wanted}  # a second, cheap pass
    pairs = [(query, pid) for query, passages in kept.items() for pid in passages]
    notice("progress", f"reranking {len(pairs)} (query, passage) pairs with {reranker.model}")
    scores = reranker.scores([beir.queries[q] for q, _ in pairs], [texts[p] for _, p in pairs])
    reranked: dict[str, dict[str, float]] = {query: {} for query in kept}
    for (query, pid), score in zip(pairs, scores):
        reranked[query][pid] = float(score_text(score))
    return reranked


def _measured(beir: Beir, run: dict) -> dict:
    return {
        k: round(v, 6)
        for k, v in retrieval_metrics(beir.qrels, {q: [p for p, _ in ranked(s)] for q, s in run.items()}).items()
    }
