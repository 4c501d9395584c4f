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
