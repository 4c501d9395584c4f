"""The bertkit side of the benchmarks: the same workloads as ``benchmarks.baselines``, run through the
public ``bertkit.api`` exactly as a user would call it, returning the same measurement keys.

    bk_sst2(n_train, n_eval, ...)     api.finetune("cls", "sst2", max_train_samples=n_train, max_eval_samples=n_eval)
    bk_ner(n_train, n_eval, ...)      api.finetune("ner", "conll2003", ...)
    bk_qa(n_train, n_eval, ...)       api.finetune("qa", <first 38 articles of dev-v1.1.json>, eval_data=<last 10>)
    bk_predict(model_dir, sentences)  api.predict on a temporary one-sentence-per-line .txt file
    decode_compare(dump_path)         bertkit's exact span decoder vs the run_qa top-20 x top-20 loop, same logits

Every function is module-level and takes picklable arguments, so ``run_isolated`` can run it in a fresh
process (its own peak RSS).

What the public API does not return is read with a ``_Probe``: inside THIS process only, it wraps a few
bertkit internals (``Engine.fit``, ``Engine.infer``, ``api._score``, ``api._load_for_inference``) with
timers and records their arguments/results, without changing what they compute.  If a wrapped name is
renamed by a later bertkit change, the probe records that and the affected numbers become NaN instead
of failing the benchmark.
"""

from __future__ import annotations

import functools
import inspect
import json
import math
import os
import pickle
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Sequence

from benchmarks._hf_common import Timer, current_rss_mb, peak_rss_mb, quiet, set_threads
from benchmarks.workloads import SQUAD_EVAL_ARTICLES, SQUAD_TRAIN_ARTICLES, data_dir

MODEL = "minilm"
NAN = float("nan")
RSS_NOTE = "peak_rss_mb is ru_maxrss of the whole process (max so far), not of this run alone"


# ------------------------------------------------------------------------------------------ probe
class _Probe:
    """Time and observe a few bertkit internals in this process (no behaviour change)."""

    def __init__(self):
        self.calls: dict[str, list[dict]] = defaultdict(list)
        self.missing: list[str] = []
        self._undo: list[tuple[Any, str, Any]] = []

    def wrap(self, owner, name: str, keep: Callable[[dict, Any], dict]) -> None:
        original = getattr(owner, name, None)
        if original is None:
            self.missing.append(f"{getattr(owner, '__name__', owner)}.{name}")
            return
        signature = inspect.signature(original)
        calls = self.calls[name]
        missing = self.missing

        @functools.wraps(original)
        def wrapper(*args, **kwargs):
            started = time.perf_counter()
            result = original(*args, **kwargs)
            record = {"seconds": time.perf_counter() - started}
            try:
                bound = signature.bind(*args, **kwargs)
                bound.apply_defaults()
                record.update(keep(bound.arguments, result))
            except Exception as exc:  # a changed signature must not break the run
                missing.append(f"{name}: {type(exc).__name__}: {exc}")
            calls.append(record)
            return result

        setattr(owner, name, wrapper)
        self._undo.append((owner, name, original))

    def replace(self, owner, name: str, make: Callable[[Any], Any]) -> None:
        """Swap ``owner.name`` for ``make(original)`` until the probe exits."""
        original = getattr(owner, name, None)
        if original is None:
            self.missing.append(f"{getattr(owner, '__name__', owner)}.{name}")
            return
        setattr(owner, name, make(original))
        self._undo.append((owner, name, original))

    def last(self, name: str) -> dict:
        return self.calls[name][-1] if self.calls.get(name) else {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for owner, name, original in reversed(self._undo):
            setattr(owner, name, original)
        self._undo.clear()
        return False


def _silence_progress(probe: _Probe) -> None:
    """bertkit's Engine passes ``disable=`` to tqdm explicitly, so TQDM_DISABLE cannot turn its bars off;
    force them off (the HF side runs with disable_tqdm=True)."""
    import bertkit.engine

    def make(original):
        def quiet_tqdm(*args, **kwargs):
            kwargs["disable"] = True
            return original(*args, **kwargs)

        return quiet_tqdm

    probe.replace(bertkit.engine, "tqdm", make)


def _training_probe(keep_outputs: bool = False) -> _Probe:
    from bertkit import api
    from bertkit.engine import Engine

    probe = _Probe()
    _silence_progress(probe)
    probe.wrap(Engine, "fit", lambda a, r: {"lengths": [len(f["input_ids"]) for f in a["features"]], "report": r[1]})
    probe.wrap(Engine, "infer", lambda a, r: {"n_features": len(a["features"]),
                                              "outputs": r if keep_outputs else None})
    probe.wrap(api, "_score", lambda a, r: {"examples": a["examples"] if keep_outputs else None,
                                            "features": a["features"] if keep_outputs else None,
                                            "n_examples": len(a["examples"])})
    return probe


# ------------------------------------------------------------------------------------------ common
def _prepare_process(num_threads: int | None) -> int:
    """Same process set-up as the baselines, and the imports bertkit does lazily (accelerate, the
    transformers model classes, scikit-learn / seqeval for the metrics) done BEFORE any timer starts, as
    the baselines import transformers / seqeval / ``pipeline`` before theirs: timings measure work, not
    first-import costs (those show in ``process_wall_seconds``)."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    quiet()
    threads = set_threads(num_threads)
    import bertkit.api  # noqa: F401
    import bertkit.engine  # noqa: F401  (torch + accelerate)
    import seqeval.metrics  # noqa: F401
    import sklearn.metrics  # noqa: F401
    from transformers import (  # noqa: F401
        AutoModelForQuestionAnswering,
        AutoModelForSequenceClassification,
        AutoModelForTokenClassification,
        AutoTokenizer,
    )

    return threads


def _header(task: str, n_train: int, n_eval: int, epochs, lr, batch_size, seed, threads) -> dict[str, Any]:
    return {"task": task, "recipe": "bertkit", "best": None, "n_train": n_train, "n_eval": n_eval, "epochs": epochs,
            "lr": lr, "batch_size": batch_size, "seed": seed, "num_threads": threads}


def _finetune(task: str, data: str, n_train: int | None, n_eval: int | None, *, epochs, lr, batch_size, seed,
              eval_batch_size: int, max_length: int | None, task_options: dict | None, eval_data: str | None,
              save_dir: str | None, root: str | None, keep_outputs: bool = False):
    """api.finetune with the probe on; returns (result, probe, wall seconds, output dir used)."""
    from bertkit import api
    from bertkit.config import TrainConfig

    config = TrainConfig(epochs=epochs, lr=lr, batch_size=batch_size, eval_batch_size=eval_batch_size,
                         max_length=max_length, seed=seed, max_train_samples=n_train, max_eval_samples=n_eval,
                         task_options=dict(task_options or {}))
    tmp = None
    if save_dir is None:
        tmp = tempfile.mkdtemp(prefix="bertkit-bench-")
        output = os.path.join(tmp, "model")
    else:
        output = save_dir
        Path(output).parent.mkdir(parents=True, exist_ok=True)
    try:
        with _training_probe(keep_outputs) as probe, Timer() as wall:
            result = api.finetune(task, data, output, model=MODEL, eval_data=eval_data, data_dir=root, config=config,
                                  overwrite=True)
    finally:
        if tmp is not None:
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
    return result, probe, wall.seconds, output


def _train_fields(result, probe: _Probe, epochs: float, n_examples: int) -> dict[str, Any]:
    """The baselines' train_* keys from a FinetuneResult plus the probe's exact counts."""
    fit = probe.last("fit")
    report = fit.get("report")
    thr = result.throughput
    seconds = float(report.train_seconds) if report is not None else float(thr["train_seconds"])
    if report is not None:
        real, total, features_fed = int(report.real_tokens), int(report.padded_tokens), int(report.examples)
        steps = int(report.optimizer_steps)
    else:  # rounded public numbers only
        real = int(round(thr["tokens_per_s"] * seconds))
        total = int(round(real / max(1e-9, 1 - thr["padding_share"])))
        features_fed, steps = int(round(thr["examples_per_s"] * seconds)), int(thr["optimizer_steps"])
    lengths = fit.get("lengths")
    history = result.history[-1] if result.history else {}
    out = {
        "train_seconds": seconds,
        # examples = sentences / questions seen (x epochs); features = model rows (QA windows, NER windows)
        "train_examples_per_s": n_examples * epochs / seconds if seconds > 0 else NAN,
        "train_features_per_s": features_fed / seconds if seconds > 0 else NAN,
        "train_steps": steps,
        "train_loss": history.get("train_loss"),
        "train_batches": None,
        "train_rows_fed": features_fed,
        "train_real_tokens": real,
        "train_total_tokens": total,
        "train_padding_share": (total - real) / total if total else 0.0,
        "train_tokens_per_s": real / seconds if seconds > 0 else NAN,
        "train_total_tokens_per_s": total / seconds if seconds > 0 else NAN,
        "bertkit_throughput": dict(thr),
    }
    if lengths is not None:
        # one epoch's features; scaled by epochs for the FLOP estimate
        out["train_feature_lengths_sum"] = int(sum(lengths))
        out["train_feature_lengths_sq_sum"] = int(sum(l * l for l in lengths))
        out["train_max_len"] = max(lengths) if lengths else 0
    return out


def _eval_fields(probe: _Probe, n_eval: int) -> dict[str, Any]:
    score = probe.last("_score")
    infer = [c for c in probe.calls.get("infer", [])]
    seconds = score.get("seconds", NAN)
    predict_seconds = infer[-1]["seconds"] if infer else NAN
    return {
        "eval_seconds": seconds,
        "eval_examples_per_s": n_eval / seconds if seconds and seconds > 0 else NAN,
        "eval_predict_seconds": predict_seconds,
        "eval_postprocess_seconds": seconds - predict_seconds if infer else NAN,
        "eval_features": infer[-1]["n_features"] if infer else None,
    }


def _finish(out: dict, rss_start: float, probe: _Probe, finetune_wall: float) -> dict:
    out["finetune_wall_seconds"] = finetune_wall
    out["probe_missing"] = list(probe.missing)
    out["rss_at_start_mb"] = rss_start
    out["peak_rss_mb"] = peak_rss_mb()
    out["rss_note"] = RSS_NOTE
    return out


def _check_count(what: str, got: int, expected: int) -> None:
    if got != expected:
        raise AssertionError(f"bertkit used {got} {what}, the HF side gets {expected}: data differs")


# ------------------------------------------------------------------------------------------ SST-2
def bk_sst2(n_train: int, n_eval: int | None = None, *, epochs: float = 1.0, lr: float = 5e-5, batch_size: int = 32,
            seed: int = 42, save_dir: str | None = None, eval_batch_size: int = 64, max_length: int = 128,
            num_threads: int | None = None, root: str | None = None, expected: tuple[int, int] | None = None) -> dict:
    """Fine-tune MiniLM on the first ``n_train`` rows of sst2/train.tsv, evaluate on the first ``n_eval``
    (default all 872) dev rows.  ``save_dir``: keep the model there (for bk_predict / the pipeline).
    ``expected``: (train, eval) counts the HF side got; asserted."""
    threads = _prepare_process(num_threads)
    rss_start = current_rss_mb()
    root = root or str(data_dir())
    result, probe, wall, output = _finetune("cls", "sst2", n_train, n_eval, epochs=epochs, lr=lr, batch_size=batch_size,
                                            seed=seed, eval_batch_size=eval_batch_size, max_length=max_length,
                                            task_options=None, eval_data=None, save_dir=save_dir, root=root)
    if expected:
        _check_count("SST-2 train rows", result.train_examples, expected[0])
        _check_count("SST-2 dev rows", result.eval_examples, expected[1])
    out = _header("sst2", result.train_examples, result.eval_examples, epochs, lr, batch_size, seed, threads)
    out.update(_train_fields(result, probe, epochs, result.train_examples))
    out["eval_accuracy"] = float(result.metrics.get("accuracy", NAN))
    out.update(_eval_fields(probe, result.eval_examples))
    out["eval_batch_size"] = eval_batch_size
    out["metrics"] = result.metrics
    out["model_dir"] = output if save_dir else None
    return _finish(out, rss_start, probe, wall)


# ------------------------------------------------------------------------------------------ NER
def bk_ner(n_train: int, n_eval: int | None = None, *, epochs: float = 1.0, lr: float = 5e-5, batch_size: int = 32,
           seed: int = 42, save_dir: str | None = None, eval_batch_size: int = 64, max_length: int | None = None,
           num_threads: int | None = None, root: str | None = None, expected: tuple[int, int] | None = None) -> dict:
    """Fine-tune on the first ``n_train`` sentences of conll2003/train.txt, evaluate on the first ``n_eval``
    (default all 3,250) of valid.txt.  bertkit's default max_length (128) with word windows: nothing is
    truncated, as on the HF side (run_ner truncates at 512, which no CoNLL sentence reaches)."""
    threads = _prepare_process(num_threads)
    rss_start = current_rss_mb()
    root = root or str(data_dir())
    result, probe, wall, output = _finetune("ner", "conll2003", n_train, n_eval, epochs=epochs, lr=lr,
                                            batch_size=batch_size, seed=seed, eval_batch_size=eval_batch_size,
                                            max_length=max_length, task_options=None, eval_data=None,
                                            save_dir=save_dir, root=root)
    if expected:
        _check_count("CoNLL train sentences", result.train_examples, expected[0])
        _check_count("CoNLL valid sentences", result.eval_examples, expected[1])
    out = _header("ner", result.train_examples, result.eval_examples, epochs, lr, batch_size, seed, threads)
    out.update(_train_fields(result, probe, epochs, result.train_examples))
    for key in ("precision", "recall", "f1", "token_accuracy"):
        out[f"eval_{key}"] = float(result.metrics.get(key, NAN))
    out.update(_eval_fields(probe, result.eval_examples))
    out["eval_batch_size"] = eval_batch_size
    out["metrics"] = {k: v for k, v in result.metrics.items() if k != "per_type"}
    out["preprocessing"] = result.preprocessing
    return _finish(out, rss_start, probe, wall)


# ------------------------------------------------------------------------------------------ SQuAD
def write_squad_split(directory: str, root: str | None = None) -> tuple[str, str]:
    """Write the by-article split of squad/dev-v1.1.json used by ``workloads.load_squad``: the first 38
    articles (train) and the last 10 (eval), as nested SQuAD JSON files in ``directory``."""
    root_path = Path(root) if root else data_dir()
    with open(root_path / "squad" / "dev-v1.1.json", encoding="utf-8") as f:
        squad = json.load(f)
    articles = squad["data"]
    if len(articles) < SQUAD_TRAIN_ARTICLES + SQUAD_EVAL_ARTICLES:
        raise ValueError(f"expected >= 48 articles in dev-v1.1.json, found {len(articles)}")
    paths = []
    for name, part in (("train", articles[:SQUAD_TRAIN_ARTICLES]), ("eval", articles[-SQUAD_EVAL_ARTICLES:])):
        path = os.path.join(directory, f"squad-{name}.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"version": squad.get("version", "1.1"), "data": part}, f)
        paths.append(path)
    return paths[0], paths[1]


def bk_qa(n_train: int, n_eval: int | None = None, *, epochs: float = 1.0, lr: float = 5e-5, batch_size: int = 32,
          seed: int = 42, save_dir: str | None = None, eval_batch_size: int = 64, max_length: int = 384,
          doc_stride: int = 128, max_answer_length: int = 30, num_threads: int | None = None,
          root: str | None = None, expected: tuple[int, int] | None = None, dump_path: str | None = None) -> dict:
    """Fine-tune on the first ``n_train`` questions of the first 38 SQuAD dev articles, evaluate on the first
    ``n_eval`` (default all) questions of the last 10.  bertkit's max_train_samples counts QUESTIONS (it cuts
    the example list before windowing), like ``load_squad(n_train)`` on the HF side.
    ``dump_path``: pickle the eval examples, features and start/end logits there (for decode_compare)."""
    threads = _prepare_process(num_threads)
    rss_start = current_rss_mb()
    with tempfile.TemporaryDirectory(prefix="bertkit-bench-squad-") as tmp:
        train_file, eval_file = write_squad_split(tmp, root)
        result, probe, wall, output = _finetune(
            "qa", train_file, n_train, n_eval, epochs=epochs, lr=lr, batch_size=batch_size, seed=seed,
            eval_batch_size=eval_batch_size, max_length=max_length,
            task_options={"doc_stride": doc_stride, "max_answer_length": max_answer_length}, eval_data=eval_file,
            save_dir=save_dir, root=root, keep_outputs=dump_path is not None)
    if expected:
        _check_count("SQuAD train questions", result.train_examples, expected[0])
        _check_count("SQuAD eval questions", result.eval_examples, expected[1])
    out = _header("squad_v1.1", result.train_examples, result.eval_examples, epochs, lr, batch_size, seed, threads)
    out.update({"max_seq_length": max_length, "doc_stride": doc_stride,
                "n_train_features": result.preprocessing.get("train_features"),
                "preprocessing": result.preprocessing})
    out.update(_train_fields(result, probe, epochs, result.train_examples))
    out["eval_exact_match"] = float(result.metrics.get("exact_match", NAN))
    out["eval_f1"] = float(result.metrics.get("f1", NAN))
    out.update(_eval_fields(probe, result.eval_examples))
    out["n_eval_features"] = out.get("eval_features")
    out["eval_batch_size"] = eval_batch_size
    out["metrics"] = result.metrics
    if dump_path:
        score, infer = probe.last("_score"), probe.last("infer")
        if not score.get("examples") or not infer.get("outputs"):
            raise RuntimeError(f"could not capture the QA eval logits (probe: {probe.missing})")
        examples, features, outputs = score["examples"], score["features"], infer["outputs"]
        dump = {
            "examples": [{"id": ex["id"], "context": ex["context"], "answers": [a["text"] for a in ex["answers"]]}
                         for ex in examples],
            "features": [{"example_index": f["example_index"], "offsets": f["offsets"], "input_ids": f["input_ids"],
                          "token_type_ids": f.get("token_type_ids")} for f in features],
            "start_logits": outputs["start_logits"],
            "end_logits": outputs["end_logits"],
            "max_answer_length": max_answer_length,
        }
        with open(dump_path, "wb") as f:
            pickle.dump(dump, f, protocol=pickle.HIGHEST_PROTOCOL)
        out["logits_dump"] = dump_path
    return _finish(out, rss_start, probe, wall)


# ------------------------------------------------------------------------------------------ predict
def bk_predict(model_dir: str, sentences: Sequence[str], batch_size: int = 64, *, labels: Sequence[int] | None = None,
               num_threads: int | None = None) -> dict:
    """Time ``api.predict(model_dir, <tmp>.txt, batch_size)`` over all sentences (one per line).

    api.predict loads the model itself and has no way to take a loaded one, so the load is timed by the
    probe around ``api._load_for_inference`` and ``predict_seconds = total - load`` (reading the file,
    tokenising, the forward passes, postprocessing and formatting the rows).  Heavy imports are done
    before the clock starts, as ``hf_pipeline_predict`` imports ``transformers.pipeline`` first."""
    threads = _prepare_process(num_threads)
    rss_start = current_rss_mb()
    from bertkit import api

    sentences = [s.replace("\t", " ").replace("\n", " ") for s in sentences]
    with tempfile.TemporaryDirectory(prefix="bertkit-bench-predict-") as tmp:
        path = os.path.join(tmp, "sentences.txt")
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(sentences) + "\n")
        probe = _Probe()
        _silence_progress(probe)
        probe.wrap(api, "_load_for_inference", lambda a, r: {})
        with probe, Timer() as total:
            rows = api.predict(model_dir, path, batch_size=batch_size)
    load = probe.last("_load_for_inference").get("seconds", NAN)
    predict_seconds = total.seconds - load if not math.isnan(load) else total.seconds
    out: dict[str, Any] = {
        "task": "bertkit_predict_cls",
        "batch_size": batch_size,
        "num_threads": threads,
        "n_sentences": len(sentences),
        "n_rows_returned": len(rows),
        "load_seconds": load,
        "predict_seconds": predict_seconds,
        "total_seconds": total.seconds,
        "load_separated": not math.isnan(load),
        "sentences_per_s": len(sentences) / predict_seconds if predict_seconds > 0 else NAN,
        "probe_missing": list(probe.missing),
    }
    if len(rows) != len(sentences):
        raise AssertionError(f"api.predict returned {len(rows)} rows for {len(sentences)} sentences")
    if labels is not None:
        meta = json.loads((Path(model_dir) / "bertkit.json").read_text())
        names = meta["task"]["labels"]
        hits = sum(int(names.index(r["label"]) == int(y)) for r, y in zip(rows, labels))
        out["accuracy"] = hits / len(rows) if rows else NAN
    out["rss_at_start_mb"] = rss_start
    out["peak_rss_mb"] = peak_rss_mb()
    out["rss_note"] = RSS_NOTE
    return out


# ------------------------------------------------------------------------------------------ QA decoding
def _best_legal_span(s, e, offsets, max_answer_length: int):
    """Exact (score, i, j) of the best legal span of one window (float64), or None."""
    import numpy as np

    s = np.asarray(s, dtype=np.float64)
    e = np.asarray(e, dtype=np.float64)
    ctx = np.array([o is not None for o in offsets], dtype=bool)
    n = len(s)
    best = None
    for k in range(min(max_answer_length, n)):
        scores = s[: n - k] + e[k:]
        legal = ctx[: n - k] & ctx[k:]
        if not legal.any():
            continue
        masked = np.where(legal, scores, -np.inf)
        i = int(masked.argmax())
        if best is None or masked[i] > best[0]:
            best = (float(masked[i]), i, i + k)
    return best


def _best_score_for_text(context: str, windows: list, text: str, max_answer_length: int) -> float:
    """Highest score of any legal span whose text is ``text`` (float64), over the given windows."""
    import numpy as np

    best = -np.inf
    for s, e, offsets in windows:
        s = np.asarray(s, dtype=np.float64)
        e = np.asarray(e, dtype=np.float64)
        n = len(s)
        for i in range(n):
            if offsets[i] is None:
                continue
            for j in range(i, min(n, i + max_answer_length)):
                if offsets[j] is not None and context[offsets[i][0]:offsets[j][1]] == text:
                    best = max(best, float(s[i] + e[j]))
    return best


def decode_compare(dump_path: str, n_best: int = 20, *, arrow: bool = True, num_threads: int | None = None) -> dict:
    """Decode the same QA logits with bertkit's exact decoder (``decode_best_batched``, the QA task's default;
    ``decode_question`` with n-best is timed too)
    and with ``loop_decode`` (run_qa's top-``n_best`` x top-``n_best`` loop), on plain lists and, with
    ``arrow``, on Arrow Datasets with the per-row access run_qa pays.  Reports time, EM/F1 (the same
    ``squad_em_f1`` for both), the questions whose answers differ, and checks that wherever the loop's
    candidates include the true best legal span, both answers are identical."""
    import numpy as np

    from bertkit.decoding.spans import _context_range, decode_best_batched, decode_question
    from benchmarks.hf_qa import loop_decode, squad_em_f1

    _prepare_process(num_threads)
    rss_start = current_rss_mb()
    with open(dump_path, "rb") as f:
        dump = pickle.load(f)
    examples, features = dump["examples"], dump["features"]
    starts, ends = dump["start_logits"], dump["end_logits"]
    max_answer = int(dump.get("max_answer_length", 30))
    gold = [{"id": ex["id"], "answers": {"text": ex["answers"]}} for ex in examples]

    # bertkit's default path (QuestionAnsweringTask._decode without --n-best): one vectorised exact
    # search over all windows of all questions
    # (the context token range is part of bertkit's features, made in preprocess, so not timed here)
    windows = [{"start_logits": starts[f], "end_logits": ends[f], "offsets": feature["offsets"],
                "context_range": feature.get("context_range") or _context_range(feature["offsets"])}
               for f, feature in enumerate(features)]
    with Timer() as t_bk:
        decodings = decode_best_batched([ex["context"] for ex in examples], windows,
                                        [feature["example_index"] for feature in features], max_answer)
        bk_answers = {ex["id"]: (d.best.text if d.best else "") for ex, d in zip(examples, decodings)}
    # bertkit's --n-best path: per question, the n_best distinct texts with probabilities
    with Timer() as t_bk_nbest:
        per_question = defaultdict(list)
        for feature, window in zip(features, windows):
            per_question[feature["example_index"]].append(window)
        nbest_answers = {}
        for i, ex in enumerate(examples):
            decoding = decode_question(ex["context"], per_question[i], max_answer, n_best, False)
            nbest_answers[ex["id"]] = decoding.best.text if decoding.best else ""

    hf_examples = [{"id": ex["id"], "context": ex["context"]} for ex in examples]
    hf_features = [{"example_id": examples[f["example_index"]]["id"], "offset_mapping": f["offsets"]}
                   for f in features]
    with Timer() as t_loop:
        loop_answers = loop_decode(hf_examples, hf_features, starts, ends, n_best_size=n_best,
                                   max_answer_length=max_answer)
    out: dict[str, Any] = {"task": "qa_decode", "n_questions": len(examples), "n_features": len(features),
                           "n_best": n_best, "max_answer_length": max_answer}
    if arrow:
        from datasets import Dataset

        # run_qa keeps the whole eval feature Dataset (ids, masks, offsets, example_id) and reads it row by row
        ds_examples = Dataset.from_list(hf_examples)
        ds_features = Dataset.from_list([
            {"input_ids": f["input_ids"], "token_type_ids": f["token_type_ids"] or [0] * len(f["input_ids"]),
             "attention_mask": [1] * len(f["input_ids"]),
             "offset_mapping": [list(o) if o is not None else None for o in f["offsets"]],
             "example_id": examples[f["example_index"]]["id"]} for f in features])
        with Timer() as t_arrow:
            arrow_answers = loop_decode(ds_examples, ds_features, starts, ends, n_best_size=n_best,
                                        max_answer_length=max_answer)
        out["loop_arrow_seconds"] = t_arrow.seconds
        out["loop_arrow_questions_per_s"] = len(examples) / t_arrow.seconds if t_arrow.seconds > 0 else NAN
        out["loop_arrow_same_as_lists"] = dict(arrow_answers) == dict(loop_answers)

    # where does the loop's shortlist contain the exact best legal span?
    windows_of = defaultdict(list)
    for f, feature in enumerate(features):
        windows_of[feature["example_index"]].append(f)
    has_max = differ = differ_with_max = differ_without_max = ties = 0
    samples = []
    for i, ex in enumerate(examples):
        best = None
        for f in windows_of[i]:
            cand = _best_legal_span(starts[f], ends[f], features[f]["offsets"], max_answer)
            if cand is not None and (best is None or cand[0] > best[0]):
                best = (*cand, f)
        included = False
        if best is not None:
            _, bi, bj, bf = best
            top_s = np.argsort(starts[bf])[-1: -n_best - 1: -1].tolist()
            top_e = np.argsort(ends[bf])[-1: -n_best - 1: -1].tolist()
            included = bi in top_s and bj in top_e
        has_max += included
        same = bk_answers[ex["id"]] == loop_answers[ex["id"]]
        if not same:
            differ += 1
            if included:
                # an exact tie (or a float32-vs-float64 rounding tie) may legitimately pick another text
                windows = [(starts[f], ends[f], features[f]["offsets"]) for f in windows_of[i]]
                loop_score = _best_score_for_text(ex["context"], windows, loop_answers[ex["id"]], max_answer)
                if best[0] - loop_score <= 1e-4 * max(1.0, abs(best[0])):
                    ties += 1
                else:
                    differ_with_max += 1
                if len(samples) < 5:
                    samples.append({"id": ex["id"], "bertkit": bk_answers[ex["id"]], "loop": loop_answers[ex["id"]],
                                    "true_max": best[0], "loop_answer_score": loop_score})
            else:
                differ_without_max += 1
    bk_metric = squad_em_f1(bk_answers, gold)
    loop_metric = squad_em_f1(dict(loop_answers), gold)
    n = len(examples)
    out.update({
        "bertkit_seconds": t_bk.seconds,
        "bertkit_questions_per_s": n / t_bk.seconds if t_bk.seconds > 0 else NAN,
        "bertkit_nbest_seconds": t_bk_nbest.seconds,
        "bertkit_nbest_same_answers": nbest_answers == bk_answers,
        "loop_seconds": t_loop.seconds,
        "loop_questions_per_s": n / t_loop.seconds if t_loop.seconds > 0 else NAN,
        "bertkit_exact_match": bk_metric["exact_match"],
        "bertkit_f1": bk_metric["f1"],
        "loop_exact_match": loop_metric["exact_match"],
        "loop_f1": loop_metric["f1"],
        "questions_answers_differ": differ,
        "questions_loop_has_true_max": has_max,
        "questions_loop_misses_true_max": n - has_max,
        "differ_where_loop_has_true_max": differ_with_max,
        "differ_by_score_tie": ties,
        "differ_where_loop_misses_true_max": differ_without_max,
        "identical_where_loop_has_true_max": differ_with_max == 0,
        "differ_with_max_samples": samples,
        "loop_empty_fallbacks": sum(1 for v in loop_answers.values() if v == "empty"),
        "rss_at_start_mb": rss_start,
        "peak_rss_mb": peak_rss_mb(),
    })
    return out
