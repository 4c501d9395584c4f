"""Which precision to run in (``--precision auto``) and bf16 training with fp32 master weights.

``auto`` picks bf16 only where the hardware computes it natively: a CPU with avx512_bf16 or
amx_bf16, a CUDA GPU whose ``is_bf16_supported(including_emulation=False)`` says so, or a TPU.
Elsewhere it picks fp32 ("no"): emulated bf16 is slower than fp32 (PyTorch issue #86270).

bf16 training keeps the model's weights in bf16 and an fp32 copy of every trainable weight that
the optimizer updates (``MasterWeights``). Autocast instead keeps fp32 weights and re-casts each
of them to bf16 in every forward pass, which on a CPU costs about a tenth of a small step; the
optimizer, gradient clipping and the saved checkpoint see the same fp32 numbers either way.

With ``sparse_embeddings`` the word-embedding table's gradient comes out of the backward pass as
the rows of this batch's tokens only (``nn.Embedding(sparse=True)``) and is added into the fp32
gradient buffer row by row: a dense 30,522 x 384 gradient would otherwise be allocated, zeroed
and copied every step (a sixth of a small CPU step). The buffer the optimizer sees is the same
dense gradient, zeros included, so AdamW's update is unchanged.
"""

from __future__ import annotations

from pathlib import Path

import torch

BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")
CPUINFO = Path("/proc/cpuinfo")


def cpu_flags(cpuinfo: Path = CPUINFO) -> set[str]:
    """The feature flags of the first CPU in ``/proc/cpuinfo`` (empty where there is none: macOS,
    Windows, a sandbox without /proc)."""
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        return set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):  # x86 and ARM spell the line differently
            return set(value.split())
    return set()


def native_bf16(device_type: str, flags: set[str] | None = None) -> tuple[bool, str]:
    """Whether ``device_type`` computes bf16 natively, and why (for the console and bertkit.json)."""
    if device_type == "cuda":
        ok = torch.cuda.is_bf16_supported(including_emulation=False)
        return ok, f"GPU {'has' if ok else 'lacks'} native bf16"
    if device_type == "xla":
        return True, "TPU computes bf16 natively"
    if device_type == "cpu":
        found = sorted(set(BF16_CPU_FLAGS) & (cpu_flags() if flags is None else flags))
        if found:
            return True, f"CPU has {', '.join(found)}"
        return False, f"CPU has neither {' nor '.join(BF16_CPU_FLAGS)} (emulated bf16 is slower than fp32)"
    return False, f"no native bf16 check for device {device_type!r}"


def resolve(requested: str, device_type: str, flags: set[str] | None = None) -> tuple[str, str]:
    """``(precision, reason)``: ``auto`` becomes ``bf16`` or ``no``; the others stay as asked."""
    if requested != "auto":
        return requested, "asked for"
    ok, why = native_bf16(device_type, flags)
    return ("bf16" if ok else "no"), f"auto: {why}"


def describe(precision: str) -> str:
    return {"no": "fp32", "bf16": "bf16", "fp16": "fp16"}.get(precision, precision)


class MasterWeights:
    """bf16 weights in the model, fp32 master weights in the optimizer.

    Built before the optimizer: ``groups`` are the model's parameter groups; ``self.groups`` are the
    same groups over fp32 masters, to give the optimizer. Per step: ``accumulate()`` after each
    backward (adds the bf16 gradients into fp32 ones, so accumulation over micro-batches happens in
    fp32), clip ``self.masters``, step the optimizer, then ``publish()`` rounds the masters into the
    bf16 model weights and clears the gradients. ``to_fp32(model)`` puts the masters back into an
    fp32 model, which is what gets saved.
    """

    def __init__(self, model: torch.nn.Module, groups: list[dict], dtype: torch.dtype = torch.bfloat16,
                 sparse_embeddings: bool = False):
        names = {id(p): n for n, p in model.named_parameters()}
        self.params, self.masters, self.names, self.groups = [], [], [], []
        for group in groups:
            masters = []
            for param in group["params"]:
                master = param.detach().to(torch.float32, copy=True)
                self.params.append(param)
                self.masters.append(master)
                self.names.append(names[id(param)])
                masters.append(master)
            self.groups.append({**group, "params": masters})
        self._grads = [None] * len(self.masters)  # fp32 buffers, allocated at the first backward
        # per buffer: the rows sparse gradients wrote since it was last all zeros; "all" = any row
        self._written: list = ["all"] * len(self.masters)
        self.sparse_module = _sparse_embedding(model) if sparse_embeddings else None
        # Frozen weights (--freeze-embeddings) and float buffers are kept too, so that the fp32 model
        # given back is the one given, not its bf16 rounding.
        trained = {id(p) for p in self.params}
        self.frozen = {name: tensor.detach().to(torch.float32, copy=True)
                       for name, tensor in [*model.named_parameters(), *model.named_buffers()]
                       if id(tensor) not in trained and tensor.is_floating_point()}
        model.to(dtype)  # in place: the same Parameter objects, now bf16

    def accumulate(self) -> None:
        fresh, fresh_from, add, add_from = [], [], [], []
        for i, (param, master) in enumerate(zip(self.params, self.masters)):
            if param.grad is None:
                continue
            if param.grad.is_sparse:
                self._add_rows(i, master, param.grad)
            elif master.grad is None:
                if self._grads[i] is None:
                    self._grads[i] = torch.empty_like(master)
                master.grad = self._grads[i]
                self._written[i] = "all"
                fresh.append(master.grad), fresh_from.append(param.grad)
            else:
                self._written[i] = "all"
                add.append(master.grad), add_from.append(param.grad)
            param.grad = None
        if fresh:
            torch._foreach_copy_(fresh, fresh_from)
        if add:
            torch._foreach_add_(add, add_from)

    def _add_rows(self, i: int, master: torch.Tensor, grad: torch.Tensor) -> None:
        rows, values = grad._indices()[0], grad._values()  # uncoalesced: repeated rows are summed by index_add_
        if master.grad is None:  # a new step: clear what earlier steps wrote
            if self._grads[i] is None:
                self._grads[i] = torch.zeros_like(master)
            elif isinstance(self._written[i], str):
                self._grads[i].zero_()
            else:
                self._grads[i].index_fill_(0, torch.cat(self._written[i]), 0)
            self._written[i] = []
            master.grad = self._grads[i]
        master.grad.index_add_(0, rows, values.to(master.dtype))
        if not isinstance(self._written[i], str):
            self._written[i].append(rows)

    def publish(self) -> None:
        """Round the updated masters into the model's bf16 weights; clear the master gradients."""
        with torch.no_grad():
            torch._foreach_copy_(self.params, self.masters)
        for master in self.masters:
            master.grad = None

    def state_dict(self, model: torch.nn.Module) -> dict:
        """The model's state on the CPU in fp32, trainable weights taken from the masters."""
        state = {k: (v.float() if v.is_floating_point() else v).detach().to("cpu", copy=True)
                 for k, v in model.state_dict().items()}
        for name, master in [*zip(self.names, self.masters), *self.frozen.items()]:
            if name in state:
                state[name] = master.detach().to("cpu", copy=True)
        return state

    def to_fp32(self, model: torch.nn.Module) -> torch.nn.Module:
        if self.sparse_module is not None:
            self.sparse_module.sparse = False
        model.to(torch.float32)
        named = {**dict(model.named_parameters()), **dict(model.named_buffers())}
        with torch.no_grad():
            torch._foreach_copy_(self.params, self.masters)
            for name, value in self.frozen.items():
                named[name].copy_(value)
        return model


def _sparse_embedding(model: torch.nn.Module):
    """Turn on sparse gradients for the trained word-embedding table; returns its module, or None
    where that does not apply (frozen, tied to an output layer, not an ``nn.Embedding``)."""
    if not hasattr(model, "get_input_embeddings"):  # a wrapper module (masked-LM pretraining)
        return None
    embedding = model.get_input_embeddings()
    output = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if not isinstance(embedding, torch.nn.Embedding) or not embedding.weight.requires_grad:
        return None
    if embedding.max_norm is not None or (output is not None and output.weight is embedding.weight):
        return None
    embedding.sparse = True
    return embedding
