"""Finding injected entity-type errors: `bertkit audit --folds K --task ner` on CoNLL-2003's first
training sentences, with the entity types of a share of the sentences swapped (a seeded draw).

The noise: among the first ``--sentences`` sentences (-DOCSTART- lines left out), ``--flip`` of
them are drawn (seeded) from those with at least one PER or ORG entity, and in each drawn sentence
every PER entity becomes ORG and every ORG entity PER (B-/I- kept). A sentence counts as corrupted
when one of its tags changed. Scored against the corrupted sentences:

* bertkit audit: the sentences cleanlab flags (``cleanlab.token_classification``: a sentence is
  flagged when one of its words is);
* disagreement: the sentences whose out-of-fold predicted tags differ from the given ones
  (the audit's ``suggested`` tags, from the fold model that held the sentence out);
* lowest quality, same count: the audit's ranking cut at its number of flags (equal to the audit
  when cleanlab's flags are the lowest scores, which token classification does not promise);
* random sentences, same count (the mean of 1,000 seeded draws).

    flock /tmp/bertkit-heavy.lock python -m benchmarks.audit_noisy_conll [--sentences 1500]
        [--flip 0.1] [--folds 4] [--epochs 3] [--seed 0]

Writes benchmarks/results/audit_noisy_conll.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.audit_noisy_sst2 import data_dir, scores

RESULTS = Path(__file__).resolve().parent / "results"
MODEL, LR, MAX_LENGTH, BATCH = "minilm", 1e-4, 64, 32
SWAP = {"PER": "ORG", "ORG": "PER"}


def sentences(count: int) -> list[list[tuple[str, str]]]:
    """CoNLL-2003's first ``count`` training sentences as (word, tag) pairs."""
    found, current = [], []
    for line in (data_dir() / "conll2003" / "train.txt").read_text(encoding="utf-8").splitlines():
        if not line.strip():
            if current:
                found.append(current)
                current = []
            if len(found) == count:
                break
            continue
        parts = line.split()
        if parts[0] != "-DOCSTART-":
            current.append((parts[0], parts[-1]))
    if current and len(found) < count:
        found.append(current)
    return found


def swapped(sentence: list[tuple[str, str]]) -> list[tuple[str, str]]:
    def tag(value: str) -> str:
        prefix, _, kind = value.partition("-")
        return f"{prefix}-{SWAP[kind]}" if kind in SWAP else value

    return [(word, tag(value)) for word, value in sentence]


def noisy_sentences(count: int, flip: float, seed: int) -> tuple[list, set[int]]:
    data = sentences(count)
    candidates = [i for i, s in enumerate(data) if any(t.split("-")[-1] in SWAP for _, t in s)]
    drawn = np.random.default_rng(seed).choice(candidates, int(round(flip * len(data))), replace=False)
    corrupted = {int(i) for i in drawn}
    return [swapped(s) if i in corrupted else s for i, s in enumerate(data)], corrupted


def run(args) -> dict:
    from benchmarks.machine import machine
    from bertkit import api
    from bertkit.options import AuditOptions, TrainConfig

    work = Path(tempfile.mkdtemp(prefix="bertkit-audit-conll-"))
    noisy, corrupted = noisy_sentences(args.sentences, args.flip, args.seed)
    data = work / "noisy.txt"
    data.write_text("".join("".join(f"{w} {t}\n" for w, t in s) + "\n" for s in noisy), encoding="utf-8")
    options = AuditOptions(data=str(data), output=str(work / "audit"), folds=args.folds, task="ner", model=args.model)
    config = TrainConfig(epochs=args.epochs, lr=LR, batch_size=BATCH, max_length=MAX_LENGTH, seed=42)
    started = time.perf_counter()
    result = api.audit(options, config)
    seconds = time.perf_counter() - started
    ranked = [json.loads(line) for line in (work / "audit" / "ranked.jsonl").read_text().splitlines()]
    flagged = {row["row"] - 1 for row in ranked if row["issue"]}
    disagree = {row["row"] - 1 for row in ranked if row["suggested"] != row["given"]}
    lowest = {row["row"] - 1 for row in ranked[: len(flagged)]}
    rng = np.random.default_rng(args.seed)
    draws = [len(set(rng.choice(len(noisy), len(flagged), replace=False).tolist()) & corrupted) for _ in range(1000)]
    return {
        "command": f"flock /tmp/bertkit-heavy.lock python -m benchmarks.audit_noisy_conll --sentences "
        f"{args.sentences} --flip {args.flip} --folds {args.folds} --epochs {args.epochs} --seed {args.seed}",
        "audit_call": f"bertkit audit --data noisy.txt --output audit --folds {args.folds} --task ner --model "
        f"{args.model} --epochs {args.epochs} --lr {LR} --batch-size {BATCH} --max-length {MAX_LENGTH}",
        "sentences": len(noisy),
        "words": sum(len(s) for s in noisy),
        "corrupted": len(corrupted),
        "corrupted_words": sum(len(s) for i, s in enumerate(noisy) if i in corrupted),
        "audit": {**scores(flagged, corrupted), "estimated_word_noise_rate": result.estimated_noise_rate},
        "disagreement": scores(disagree, corrupted),
        "lowest_quality_same_count": scores(lowest, corrupted),
        "random_same_count": {
            "flagged": len(flagged),
            "precision": round(float(np.mean(draws)) / len(flagged), 4) if flagged else None,
            "recall": round(float(np.mean(draws)) / len(corrupted), 4),
        },
        "audit_model_check": result.summary.get("model_check"),
        "audit_warnings": result.summary.get("warnings", []),
        "audit_seconds": round(seconds, 1),
        "machine": machine(),
    }


def markdown(report: dict) -> str:
    m = report["machine"]
    lines = [
        "# Finding injected entity-type errors on CoNLL-2003 (bertkit audit, ner)",
        "",
        f"The first {report['sentences']:,} CoNLL-2003 training sentences ({report['words']:,} words); in "
        f"{report['corrupted']} of them (10%, drawn with a fixed seed among the sentences holding a PER or ORG "
        f"entity; {report['corrupted_words']:,} words) every PER entity became ORG and every ORG entity PER. "
        f"Command: `{report['command']}`; the audit it runs: `{report['audit_call']}`.",
        "",
        "| ranking (sentences) | flagged | precision | recall |",
        "|---|---|---|---|",
    ]
    for name, key in (
        ("bertkit audit (cleanlab.token_classification)", "audit"),
        ("out-of-fold predicted tags differ from the given ones", "disagreement"),
        ("lowest sentence quality, same count as the audit", "lowest_quality_same_count"),
        ("random sentences, same count (mean of 1,000 draws)", "random_same_count"),
    ):
        row = report[key]
        lines.append(f"| {name} | {row['flagged']} | {row['precision']} | {row['recall']} |")
    lines += [
        "",
        f"Estimated noise rate of the words (cleanlab's joint): {report['audit']['estimated_word_noise_rate']:.3f}. "
        f"The audit's own check of its model: {_check(report['audit_model_check'])}; "
        f"warnings: {report['audit_warnings'] or 'none'}.",
        f"The audit took {report['audit_seconds']} s (folds, scoring each sentence by its fold's model).",
        "",
        f"Machine: {m['date']}; {m['cpu_model']} ({' '.join(m['cpu_flags'])}), {m['usable_cores']} cores, "
        f"torch threads {m['torch_threads']}, torch {m['torch']}, transformers {m['transformers']}, "
        f"commit {m['git_commit'][:10]}.",
        "",
    ]
    return "\n".join(lines)


def _check(check: dict | None) -> str:
    if not check:
        return "not recorded"
    numbers = ", ".join(f"{k} {v:.4f}" for k, v in check["metrics"].items())
    base = ", ".join(f"{k} {v:.4f}" for k, v in check["baseline"]["metrics"].items())
    verdict = "beats it" if check["beats_baseline"] else "does not beat it"
    return f"out-of-fold {numbers}; the {check['baseline']['name']} baseline: {base} ({verdict})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sentences", type=int, default=1500)
    parser.add_argument("--flip", type=float, default=0.1)
    parser.add_argument("--folds", type=int, default=4)
    parser.add_argument("--epochs", type=float, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--name", default="audit_noisy_conll")
    parser.add_argument("--model", default=MODEL, help="a quick check of the script: a tiny model directory")
    args = parser.parse_args()
    report = run(args)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.name}.json").write_text(json.dumps(report, indent=2) + "\n")
    (RESULTS / f"{args.name}.md").write_text(markdown(report))
    print(markdown(report))


if __name__ == "__main__":
    main()
