"""--compile: the encoder's layer stack compiled with torch.compile while a run trains, when it pays.

What is compiled: the stack of transformer layers under a task head (``model.bert.encoder``), not
the embeddings, whose sparse gradient (engine/optimisation.py) breaks the graph at ``aten.nonzero``,
nor the head. ``dynamic=True``: length-grouped batches change length nearly every step, and with
static shapes inductor compiled again at each new length (MiniLM bf16, 2 threads: 122 s, 57 s and
52 s for lengths 32, 64 and 96); with a symbolic length it compiles once more at most. Dropout
draws eager's random numbers (``fallback_random``): a compiled run takes the same masks from the
same generator, so checkpoints resume as in eager. Inductor's caches (FX graphs, AOT autograd) are
kept under ``cache_directory()``, so a second run of the same model loads its kernels instead of
compiling them.

``auto`` measures ``MEASURED_STEPS`` eager steps, then compiles when the steps left times the step
time times the share a compiled step saves exceed the compile time it expects (cold, or warm once
this model was compiled on this machine): ``PAYBACK``, per device type, with where each number
comes from. On the CPU a compiled step was measured slower than bertkit's eager one, so auto never
compiles there; ``on`` compiles from the first step anyway; ``off`` never.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

from bertkit.errors import BertkitError

BACKEND = "inductor"  # tests trace with "aot_eager": the same graphs and autograd, no C++ to build
MEASURED_STEPS = 10  # eager steps timed by auto, after START_STEP (the first steps warm oneDNN's caches)
START_STEP = 3


@dataclass(frozen=True)
class Payback:
    """What compiling saves per step (a share of the eager step) and what it costs (seconds)."""

    saving: float
    cold_seconds: float
    warm_seconds: float
    source: str


PAYBACK = {
    # measured whole runs (SST-2 4,000 rows, MiniLM bf16, 2 threads, `python -m benchmarks.compile_run`,
    # benchmarks/results/compile_run.md): the compiled step took 0.26 s against eager's 0.14 s
    # (0.52x) after 93 s of compiling (36 s with the cache warm), so auto never compiles on the CPU
    "cpu": Payback(-0.93, 93.0, 36.0, "measured: benchmarks/results/compile_run.md"),
    # not measured here (no GPU lent): TorchInductor's training speed-up on an A100, 1.41x geometric
    # mean over 180+ models (Ansel et al., "PyTorch 2", ASPLOS 2024); the compile times as the CPU's
    "cuda": Payback(0.29, 93.0, 36.0, "Ansel et al. 2024 (1.41x training, A100); not measured by bertkit"),
}


def worth_compiling(device_type: str, steps_left: int, step_seconds: float, warm: bool) -> tuple[bool, str]:
    """Whether ``steps_left`` steps of ``step_seconds`` pay back compiling, and the line that says why."""
    payback = PAYBACK.get(device_type)
    if payback is None:
        return False, f"--compile auto: no compiled speed known for {device_type}; training runs eager"
    if payback.saving <= 0:
        return False, f"--compile auto: compiled steps were measured slower on the {device_type} ({payback.source})"
    cost = payback.warm_seconds if warm else payback.cold_seconds
    saved = steps_left * step_seconds * payback.saving
    state = "cached" if warm else "not cached"
    numbers = (
        f"{steps_left} steps left at {step_seconds:.2f} s would save ~{saved:.0f} s "
        f"for ~{cost:.0f} s of compiling ({state})"
    )
    if saved > cost:
        return True, f"--compile auto: compiling the encoder layers ({numbers})"
    return False, f"--compile auto: not compiling ({numbers})"


# read before torch._inductor is imported: importing it sets the variable to its default under /tmp
_GIVEN_CACHE = os.environ.get("TORCHINDUCTOR_CACHE_DIR")


def cache_directory() -> Path:
    """Where inductor keeps compiled kernels across runs: TORCHINDUCTOR_CACHE_DIR as the user set
    it, else under the user's cache directory (inductor's own default is under /tmp)."""
    if _GIVEN_CACHE:
        return Path(_GIVEN_CACHE)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "bertkit" / "torch-compile"


def layer_stack(encoder):
    """The transformer layers of an encoder (BERT-like ``encoder``, DistilBERT's ``transformer``), or None."""
    for name in ("encoder", "transformer"):
        stack = getattr(encoder, name, None)
        if stack is not None and hasattr(stack, "_call_impl"):
            return stack
    return None


class CompiledLayers:
    """``apply()``/``undo()`` as the CPU kernels: the layer stack runs compiled while training
    (evaluation runs eager: another graph to compile for a few batches), once compiling is on."""

    def __init__(self, stack, mode: str, device_type: str, shape_key: str, why_not: str | None, say):
        self.stack, self.mode, self.device_type, self.say = stack, mode, device_type, say
        self.marker = cache_directory() / "bertkit-compiled" / shape_key
        self.compiled, self.active, self.timer = None, False, None
        self.facts = {"mode": mode, "compiled": False}
        if mode == "on" and why_not is not None:
            raise BertkitError(f"--compile on: {why_not}", "use --compile auto or off")
        if mode == "auto" and why_not is not None:
            self.mode = "off"
            self.facts["why_not"] = why_not
        if self.mode == "on":
            self._turn_on("--compile on: compiling the encoder layers (the first step takes a minute or more)")

    def after_step(self, step: int, total_steps: int) -> None:
        """``auto``: time steps START_STEP .. START_STEP + MEASURED_STEPS, then decide once; and
        once compiled, the first compiled step's time (compiling included)."""
        if self.compiled is not None:
            self._first_step_done()
            return
        if self.mode != "auto" or "decided_at" in self.facts:
            return
        if step == START_STEP:
            self.timer = time.perf_counter()
        elif step == START_STEP + MEASURED_STEPS and self.timer is not None:
            step_seconds = (time.perf_counter() - self.timer) / MEASURED_STEPS
            on, line = worth_compiling(self.device_type, total_steps - step, step_seconds, self.marker.exists())
            self.facts.update(decided_at=step, eager_step_seconds=round(step_seconds, 4))
            if on:
                self._turn_on(line)
                self.apply()
            else:  # recorded (bertkit.json), not said: the eager run is what was asked for
                self.facts["why_not"] = line

    def _turn_on(self, line: str) -> None:
        import torch
        import torch._dynamo.config as dynamo
        import torch._inductor.config as inductor

        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(cache_directory())  # read by inductor at each compile
        inductor.fallback_random = True  # eager's dropout masks: the same numbers, resume exact
        dynamo.suppress_errors = True  # a graph that fails to compile (no C++ compiler...) runs eager, with a warning
        self.compiled = torch.compile(self.stack._call_impl, dynamic=True, backend=BACKEND)
        self.facts.update(compiled=True, cache=os.environ["TORCHINDUCTOR_CACHE_DIR"])
        self.say(line)

    def apply(self) -> None:
        if self.compiled is not None:
            self.stack._compiled_call_impl = self.compiled
            self.active = True
            self.timer = self.timer if "first_step_seconds" in self.facts else time.perf_counter()

    def undo(self) -> None:
        if self.active:
            self.stack._compiled_call_impl = None
            self.active = False

    def _first_step_done(self) -> None:
        """The first compiled step's time, compiling included; the model's kernels are now cached."""
        if "first_step_seconds" not in self.facts and self.timer is not None:
            self.facts["first_step_seconds"] = round(time.perf_counter() - self.timer, 2)
            self.marker.parent.mkdir(parents=True, exist_ok=True)
            self.marker.touch()


def compiled_layers(model, config, world: int, device_type: str, precision: str, say) -> CompiledLayers:
    """``config.compile`` for ``model`` (the unwrapped training network); refuses ``on`` in one line
    where it was not tested, and leaves ``auto`` off there."""
    from bertkit.networks.packed_heads import encoder_of, packs, task_model

    mode = getattr(config, "compile", "off")
    encoder = encoder_of(task_model(model))
    stack = layer_stack(encoder) if encoder is not None else None
    why_not = _why_not_compiled(config, world, stack, packed=packs(model))
    key = shape_key(encoder.config, precision, device_type) if encoder is not None else ""
    return CompiledLayers(stack, mode, device_type, key, why_not, say)


def _why_not_compiled(config, world: int, stack, packed: bool) -> str | None:
    if stack is None:
        return "bertkit compiles one task head's encoder layers only (not multi-head, embedding or pre-training runs)"
    if packed:
        return "packed batches run uncompiled (--packing off compiles)"
    if getattr(config, "save_memory", False):
        return "not with --save-memory (its recomputed attention is untested compiled)"
    if getattr(config, "lora", None):
        return "not with --lora (untested compiled)"
    if world > 1:
        return "not in several processes (untested compiled)"
    return None


def shape_key(config, precision: str, device_type: str) -> str:
    """What makes inductor's kernels for one model reusable: torch, device, precision and shapes."""
    import torch

    parts = [torch.__version__, device_type, precision, getattr(config, "model_type", "?")]
    parts += [str(getattr(config, name, "")) for name in ("hidden_size", "num_hidden_layers", "num_attention_heads")]
    parts += [str(getattr(config, name, "")) for name in ("dim", "n_layers", "intermediate_size", "hidden_dim")]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]
