"""The runtime's lines as a person reads them, said as soon as the engine has chosen them (torch-free:
the CLI formats a saved model's runtime with the same words)."""

from __future__ import annotations


def precision_text(runtime: dict) -> str:
    """e.g. ``precision: bf16 (auto: CPU has avx512_bf16), 2 threads``."""
    threads = runtime["threads"]
    return (
        f"precision: {runtime['precision_name']} ({runtime['precision_reason']}), {threads} "
        f"thread{'s' if threads != 1 else ''}"
    )


def say_runtime(runtime: dict) -> None:
    """Tell the listeners (bertkit.events) the precision and threads, and a busy machine, now."""
    from bertkit.events import notice

    notice("runtime", precision_text(runtime), **{k: v for k, v in runtime.items() if k != "notice"})
    if runtime.get("notice"):
        notice("machine", runtime["notice"], threads=runtime["threads"])


def lazy_embeddings_refused():
    """The BertkitError for --lazy-embeddings where it cannot apply: the engine's rule
    (engine/optimisation.py), said by the options too where no model is needed to see it."""
    from bertkit.errors import BertkitError

    return BertkitError(
        "--lazy-embeddings updates the rows of word embeddings of their own that one process trains in bf16, "
        "or in fp32 on a CPU",
        "train in one process, with trainable embeddings not tied to an output layer, in bf16 "
        "(--precision bf16) or on a CPU; or drop --lazy-embeddings",
    )
