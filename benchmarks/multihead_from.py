"""Adding a head to a trained multi-head model (`bertkit finetune multi --from DIR`): what the old
heads lose. DIR is the five-head model benchmarks/multihead.py trained (SST-2, MRPC, RTE, STS-B,
CoNLL-2003 on MiniLM); the new head is GoEmotions (multi-label, 28 emotions), trained on its first
``--rows`` comments, twice: with the encoder training on (the old heads' scores can move) and with
``--freeze-encoder`` (only the new head's own layers train). Each old head is scored by bertkit
itself on its own evaluation rows before and after (bertkit.json's ``from`` section); the new head's
dev metrics stand beside its trivial baseline. Results: benchmarks/results/multihead_from.json, .md.

    flock /tmp/bertkit-heavy.lock python benchmarks/multihead_from.py --from /tmp/bertkit-multihead-bench/multi-42
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.multihead import bertkit, machine  # noqa: E402

RESULTS = REPO / "benchmarks" / "results"


def added(args, output: Path, frozen: bool) -> dict:
    command = [
        "finetune", "multi", "--from", args.from_dir, "--task", "emotions:multi-label:goemotions",
        "--max-train-samples", str(args.rows), "--max-eval-samples", str(args.eval_rows), "--epochs", str(args.epochs),
        "--batch-size", "16", "--lr", str(args.lr), "--max-length", "128", "--threads", str(args.threads),
        "--output", str(output), "--overwrite", *(["--freeze-encoder"] if frozen else []),
    ]  # fmt: skip
    seconds = bertkit(command)
    meta = json.loads((output / "bertkit.json").read_text())
    new = next(h for h in meta["heads"] if h["name"] == "emotions")
    return {
        "command": "bertkit " + " ".join(command),
        "seconds": round(seconds, 1),
        "forgetting": meta["from"]["forgetting"],
        "new_head": {k: v for k, v in new["metrics"].items() if isinstance(v, float)},
    }


def markdown(report: dict) -> str:
    m = report["machine"]
    lines = [
        "# Adding a head to a trained multi-head model (`finetune multi --from`)",
        "",
        f"Command: `{report['command']}`; {m['cpu']} ({m['cores']} cores), flags: {', '.join(m['flags'])}.",
        "",
        f"DIR: `{report['from']}` (benchmarks/multihead.py's five heads). New head: GoEmotions multi-label, the first "
        f"{report['rows']} training comments, {report['epochs']} epochs, lr {report['lr']}; dev metrics on the first "
        f"{report['eval_rows']} dev comments. Old heads scored by bertkit on their own evaluation rows, before and "
        "after.",
        "",
        "| old head | main metric | before | after (encoder trained) | change | after (--freeze-encoder) | change |",
        "|---|---|---|---|---|---|---|",
    ]
    moved, frozen = report["encoder_trained"]["forgetting"], report["encoder_frozen"]["forgetting"]
    for name, entry in moved.items():
        still = frozen[name]
        lines.append(
            f"| {name} | {entry['metric']} | {entry['before']:.4f} | {entry['after']:.4f} | {entry['change']:+.4f} | "
            f"{still['after']:.4f} | {still['change']:+.4f} |"
        )
    lines += ["", "| new head (emotions) | encoder trained | --freeze-encoder |", "|---|---|---|"]
    for key in ("micro_f1", "macro_f1"):
        lines.append(
            f"| {key} | {report['encoder_trained']['new_head'].get(key, float('nan')):.4f} | "
            f"{report['encoder_frozen']['new_head'].get(key, float('nan')):.4f} |"
        )
    lines += [
        "",
        f"Wall time: {report['encoder_trained']['seconds']:.0f} s (encoder trained), "
        f"{report['encoder_frozen']['seconds']:.0f} s (frozen), each with the old heads' two scorings.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--from", dest="from_dir", required=True)
    parser.add_argument("--rows", type=int, default=1500)
    parser.add_argument("--eval-rows", type=int, default=500)
    parser.add_argument("--epochs", type=float, default=2)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--work", default="/tmp/bertkit-multihead-from")
    args = parser.parse_args()
    work = Path(args.work)
    started = time.perf_counter()
    report = {
        "command": "python benchmarks/multihead_from.py " + " ".join(sys.argv[1:]),
        "machine": machine(),
        "from": args.from_dir,
        **{k: getattr(args, k) for k in ("rows", "eval_rows", "epochs", "lr")},
        "encoder_trained": added(args, work / "trained", frozen=False),
        "encoder_frozen": added(args, work / "frozen", frozen=True),
    }
    report["seconds"] = round(time.perf_counter() - started, 1)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "multihead_from.json").write_text(json.dumps(report, indent=1) + "\n")
    (RESULTS / "multihead_from.md").write_text(markdown(report))
    print(markdown(report))


if __name__ == "__main__":
    main()
