"""bf16 training with fp32 master weights, kept flat.

The model holds bf16 weights; the optimizer updates fp32 masters. Autocast would instead keep fp32
weights and re-cast every one of them to bf16 in every forward pass, which on a CPU costs about a
tenth of a small step; the optimizer, clipping and the saved checkpoint see the same fp32 numbers
either way.

The masters of each parameter group live in ONE flat fp32 tensor (each weight a view of it), and
so do their gradients: gradient clipping is one norm and one scale per group and AdamW's fused
kernel gets two tensors instead of a hundred. Per-tensor norms and scales cost ~60 us each on a
CPU, a tenth of a small MiniLM step for clipping alone.

With ``sparse_embeddings`` the word-embedding table's gradient comes out of the backward pass as
the rows of this batch's tokens only (``nn.Embedding(sparse=True)``) and is added into its own
fp32 gradient buffer row by row; clipping reads and scales those rows only. A dense 30,522 x 384
gradient would otherwise be allocated, zeroed and copied every step. The buffer the optimizer sees
is the same dense gradient, zeros included, so AdamW's update is unchanged.

Off the CPU, clipping never waits for the device: the norm stays a device tensor and the
gradients are multiplied by ``min(1, max_norm / norm)`` unconditionally (torch's own
``clip_grad_norm_`` does the same), over the embedding's whole gradient buffer (rows without a
gradient are zeros), so the host keeps queueing kernels ahead of the GPU. Reading the norm into
Python and picking rows (``float``, ``torch.unique``) would make it wait at every step.

With ``early_gradients`` (one process) each weight's gradient goes into its fp32 view the moment
the backward pass produces it (a post-accumulate-grad hook), while it is still in the cache, instead of
in one pass over all of them after the backward pass: a MiniLM bf16 CoNLL-sized step (32 x 21 tokens,
paired, /tmp probe) spent 0.6 ms instead of 4.3 ms on the copies after the backward pass and about 2 ms
more inside it, 1.3 % of the step in all. With several processes DDP must all-reduce the gradients
first, so they are copied after the backward pass as before.

With ``dtype=torch.float32`` (fp32 training on a CPU, for sparse embedding gradients, flat tensors and
lazy embeddings) the weights ARE the masters: each parameter's data is its view of the flat master (the
embedding table its master), so nothing is copied or kept twice and ``publish`` only clears the
gradients; ``to_fp32`` gives each weight its own storage back (a saved model holds no shared views).
"""

from __future__ import annotations

import functools

import torch


class MasterWeights:
    """Built before the optimizer from the model's parameter groups; ``self.groups`` are the groups
    to give the optimizer. Per step: ``accumulate()`` after each backward (fp32 accumulation over
    micro-batches), ``clip_(max_norm)`` or ``grad_norm()``, the optimizer's step, ``publish()``
    (rounds the masters into the bf16 weights, clears the gradients). ``to_fp32(model)`` puts the
    masters back into an fp32 model; ``state_dict(model)`` is that state without touching the model."""

    def __init__(
        self,
        model: torch.nn.Module,
        groups: list[dict],
        dtype: torch.dtype = torch.bfloat16,
        sparse_embeddings: bool = False,
        early_gradients: bool = False,
    ):
        names = {id(p): n for n, p in model.named_parameters()}
        self.aliased = dtype == torch.float32  # the weights are the masters (module doc)
        self.sparse_module = _sparse_embedding(model) if sparse_embeddings else None
        sparse_weight = self.sparse_module.weight if self.sparse_module is not None else None
        self.params, self.views, self.grad_views, self.names = [], [], [], []  # dense trained weights
        self.flats, self.groups = [], []
        self.sparse = None  # [bf16 param, fp32 master, fp32 gradient buffer or None, rows written or "all"]
        for group in groups:
            dense = [p for p in group["params"] if p is not sparse_weight]
            tensors = []
            if dense:
                flat = torch.empty(sum(p.numel() for p in dense), dtype=torch.float32, device=dense[0].device)
                grad = torch.zeros_like(flat)
                offset = 0
                for param in dense:
                    n = param.numel()
                    self.views.append(flat[offset : offset + n].view_as(param))
                    self.views[-1].copy_(param.detach())
                    if self.aliased:
                        param.data = self.views[-1]
                    self.grad_views.append(grad[offset : offset + n].view_as(param))
                    self.params.append(param)
                    self.names.append(names[id(param)])
                    offset += n
                self.flats.append([flat, grad])
                tensors.append(flat)
            if len(dense) < len(group["params"]):
                master = sparse_weight.detach().to(torch.float32, copy=True)
                if self.aliased:
                    sparse_weight.data = master
                self.sparse = [sparse_weight, master, None, "all"]
                self.sparse_name = names[id(sparse_weight)]
                tensors.append(master)
            if tensors:
                self.groups.append({**group, "params": tensors})
        # a GPU (or other accelerator): clipping must not read values back (see the module's doc)
        self.on_device = next(model.parameters()).device.type != "cpu"
        self._fresh = True  # the next accumulate() starts a new step's gradients
        self._rows = False  # this step's embedding rows, once asked for (False: not yet)
        self._taken = set()  # dense weights whose gradient the hooks took since the last accumulate()
        self._hooks = [
            param.register_post_accumulate_grad_hook(functools.partial(self._take_gradient, index))
            for index, param in enumerate(self.params if early_gradients else [])
        ]
        # Frozen weights (--freeze-embeddings) and float buffers are kept too, so that the fp32 model
        # given back is the one given, not its bf16 rounding.
        # (fp32, aliased: the model never leaves fp32, so there is nothing to keep)
        trained = {id(p) for p in self.params} | ({id(sparse_weight)} if self.sparse else set())
        self.frozen = {
            name: tensor.detach().to(torch.float32, copy=True)
            for name, tensor in [*model.named_parameters(), *model.named_buffers()]
            if id(tensor) not in trained and tensor.is_floating_point() and not self.aliased
        }
        model.to(dtype)  # in place: the same Parameter objects, now bf16

    # --- per step -----------------------------------------------------------------------------
    def _take_gradient(self, index: int, param: torch.Tensor) -> None:
        """The backward pass just wrote ``param.grad`` (``early_gradients``): into its fp32 view now."""
        view = self.grad_views[index]
        # a weight used in several checkpointed segments (ALBERT's shared layer) comes here once a segment
        (view.copy_ if self._fresh and index not in self._taken else view.add_)(param.grad)
        self._taken.add(index)
        param.grad = None

    def accumulate(self) -> None:
        targets, grads = [], []
        for index, (param, view) in enumerate(zip(self.params, self.grad_views)):
            if param.grad is None:
                if self._fresh and index not in self._taken:  # no gradient this step (an unused head): zeros
                    view.zero_()
                continue
            targets.append(view), grads.append(param.grad)
            param.grad = None
        if targets:
            (torch._foreach_copy_ if self._fresh else torch._foreach_add_)(targets, grads)
        if self.sparse is not None:
            self._accumulate_sparse()
        for flat, grad in self.flats:
            flat.grad = grad
        self._fresh, self._rows = False, False
        self._taken.clear()

    def _accumulate_sparse(self) -> None:
        param, master, buffer, written = self.sparse
        grad, param.grad = param.grad, None
        if buffer is None:
            buffer = self.sparse[2] = torch.zeros_like(master)
            written = []
        elif self._fresh:  # clear what the last step wrote
            if written == "all":
                buffer.zero_()
            elif written:
                buffer.index_fill_(0, torch.cat(written), 0)
            written = []
        if grad is not None and grad.is_sparse:  # uncoalesced: index_add_ sums repeated rows
            buffer.index_add_(0, grad._indices()[0], grad._values().to(torch.float32))
            if written != "all":
                written.append(grad._indices()[0])
        elif grad is not None:  # a dense gradient (e.g. a module that bypassed the sparse lookup)
            buffer.add_(grad)
            written = "all"
        self.sparse[3] = written
        master.grad = buffer

    def _sparse_rows(self):
        """The word-embedding rows with a gradient this step (sorted, unique; None: every row)."""
        if self._rows is False:
            written = self.sparse[3]
            self._rows = (
                None
                if written == "all"
                else torch.unique(torch.cat(written))
                if written
                else torch.zeros(0, dtype=torch.long)
            )
        return self._rows

    def sparse_master(self):
        """The word embeddings' fp32 master and a callable giving this step's rows (lazy_embeddings)."""
        return (None, None) if self.sparse is None else (self.sparse[1], self._sparse_rows)

    def grad_norm(self, scale_to: float | None = None) -> torch.Tensor:
        """The total L2 norm of the gradients; with ``scale_to``, clip them to that norm (as
        ``torch.nn.utils.clip_grad_norm_`` does, without touching a zero row)."""
        if self.on_device:
            return self._grad_norm_without_waiting(scale_to)
        squares = [_sum_of_squares(grad) for _, grad in self.flats]
        rows = None
        if self.sparse is not None and self.sparse[2] is not None:
            rows = self._sparse_rows()
            buffer = self.sparse[2]
            picked = buffer if rows is None else buffer.index_select(0, rows) if len(rows) else None
            if picked is not None:
                squares.append(_sum_of_squares(picked))
        total = torch.stack(squares).sum().sqrt() if squares else torch.zeros(())
        if scale_to is not None:
            coef = scale_to / (float(total) + 1e-6)
            if coef < 1.0:
                for _, grad in self.flats:
                    grad.mul_(coef)
                if rows is None and self.sparse is not None and self.sparse[2] is not None:
                    self.sparse[2].mul_(coef)
                elif rows is not None and len(rows):
                    self.sparse[2].index_copy_(0, rows, picked.mul_(coef))
        return total

    def _grad_norm_without_waiting(self, scale_to: float | None) -> torch.Tensor:
        grads = [grad for _, grad in self.flats]
        if self.sparse is not None and self.sparse[2] is not None:
            grads.append(self.sparse[2])
        total = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(grad) for grad in grads]))
        if scale_to is not None:
            torch._foreach_mul_(grads, (scale_to / (total + 1e-6)).clamp(max=1.0))
        return total

    def clip_(self, max_norm: float) -> torch.Tensor:
        return self.grad_norm(scale_to=max_norm)

    def publish(self, rows_only: bool = False) -> None:
        """Round the updated masters into the model's bf16 weights; clear the gradients. With
        ``rows_only`` (a lazy optimizer changed only this step's embedding rows) only those rows. fp32
        (aliased): the weights are the masters, nothing to copy."""
        with torch.no_grad():
            if not self.aliased:
                torch._foreach_copy_(self.params, self.views)
            if self.sparse is not None:
                param, master = self.sparse[0], self.sparse[1]
                if not self.aliased:
                    rows = self._sparse_rows() if rows_only and master.grad is not None else None
                    if rows is None:
                        param.copy_(master)
                    elif len(rows):
                        param.index_copy_(0, rows, master.index_select(0, rows).to(param.dtype))
                master.grad = None
        for flat, _ in self.flats:
            flat.grad = None
        self._fresh, self._rows = True, False

    # --- the trained weights --------------------------------------------------------------------
    def master(self, name: str) -> torch.Tensor:
        """The fp32 master of the weight called ``name`` (its ``.grad``: ``gradient(name)``)."""
        return dict(self._named_masters())[name]

    def gradient(self, name: str) -> torch.Tensor | None:
        if self.sparse is not None and name == self.sparse_name:
            return self.sparse[2]
        return None if self._fresh else self.grad_views[self.names.index(name)]

    def _named_masters(self):
        yield from zip(self.names, self.views)
        if self.sparse is not None:
            yield self.sparse_name, self.sparse[1]
        yield from self.frozen.items()

    def state_dict(self, model: torch.nn.Module) -> dict:
        """The model's state on the CPU in fp32, trainable weights taken from the masters."""
        state = {
            k: (v.float() if v.is_floating_point() else v).detach().to("cpu", copy=True)
            for k, v in model.state_dict().items()
        }
        for name, master in self._named_masters():
            if name in state:
                state[name] = master.detach().to("cpu", copy=True)
        return state

    def to_fp32(self, model: torch.nn.Module) -> torch.nn.Module:
        for hook in self._hooks:  # the model given back keeps its gradients
            hook.remove()
        self._hooks = []
        if self.sparse_module is not None:
            self.sparse_module.sparse = False
        model.to(torch.float32)
        named = {**dict(model.named_parameters()), **dict(model.named_buffers())}
        with torch.no_grad():
            for name, master in self._named_masters():
                if self.aliased:  # its own storage again, not a view of the flat master
                    named[name].data = master.detach().clone()
                else:
                    named[name].copy_(master)
        return model


def _sum_of_squares(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor``'s squared L2 norm as one BLAS dot product. On the CPU it reads the flat fp32
    gradients twice as fast as ``torch.linalg.vector_norm`` (11 M elements, 2 threads, /tmp probe:
    0.88 ms against 1.61; the clipping phase of a MiniLM bf16 step 4.2 -> 2.2 ms, paired) and sums
    more exactly: against the float64 norm of 11 M normal numbers it was off by 7e-6 relative where
    ``vector_norm`` was off by 4e-4."""
    flat = tensor.reshape(-1)
    return torch.dot(flat, flat)


def sparse_embedding_possible(model: torch.nn.Module) -> bool:
    return _trained_embedding(model) is not None


def _sparse_embedding(model: torch.nn.Module):
    """Turn on sparse gradients for the trained word-embedding table; returns its module, or None
    where that does not apply (frozen, tied to an output layer, not an ``nn.Embedding``)."""
    embedding = _trained_embedding(model)
    if embedding is not None:
        embedding.sparse = True
    return embedding


def _trained_embedding(model: torch.nn.Module):
    if not hasattr(model, "get_input_embeddings"):  # a wrapper module (masked-LM pretraining)
        return None
    embedding = model.get_input_embeddings()
    output = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if not isinstance(embedding, torch.nn.Embedding) or not embedding.weight.requires_grad:
        return None
    if embedding.max_norm is not None or (output is not None and output.weight is embedding.weight):
        return None
    return embedding
