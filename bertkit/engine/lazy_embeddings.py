"""``--lazy-embeddings``: AdamW that updates only the word-embedding rows a step used (TF's LazyAdam).

The word-embedding table is over half of a small BERT's weights (MiniLM: 11.7 M of 22.7 M), and a
step of 32 sentences uses a few hundred of its 30,522 rows. Plain AdamW still reads and writes the
moments and the weight of every row at every step (the zero gradient of an unused row decays its
moments and moves it by its momentum, and weight decay shrinks it); on a CPU that memory traffic,
and rounding the whole table into the bf16 weights, is a large share of a small step.

Lazily, a row is updated only at the steps whose batches contain one of its tokens: its moments
and its weight decay advance then, with the bias correction of the global step (as LazyAdam does);
every other row, its moments included, stays as it was. A row used at every step gets exactly
AdamW's update. It changes the training (an unused row no longer drifts on stale momentum), so it
is an option, off by default, its accuracy measured in the README.
"""

from __future__ import annotations

import torch


class LazyAdamW(torch.optim.AdamW):
    """``torch.optim.AdamW`` (fused where it can) for every parameter but ``lazy``, which gets the
    row-wise update above from ``rows()`` (the rows with a gradient this step, None for all). Its
    state has AdamW's keys, so checkpoints save and load it as before."""

    def __init__(self, groups: list[dict], lazy: torch.Tensor, rows, **options):
        super().__init__(groups, **options)
        self.lazy, self.rows = lazy, rows

    @torch.no_grad()
    def step(self, closure=None):
        group = next(g for g in self.param_groups if any(p is self.lazy for p in g["params"]))
        others = group["params"]
        group["params"] = [p for p in others if p is not self.lazy]
        try:
            super().step(closure)
        finally:
            group["params"] = others
        if self.lazy.grad is not None:
            self._lazy_step(group)

    def _lazy_step(self, group: dict) -> None:
        state = self.state[self.lazy]
        if not state:
            state["step"] = torch.tensor(0.0, dtype=torch.float32)
            state["exp_avg"] = torch.zeros_like(self.lazy)
            state["exp_avg_sq"] = torch.zeros_like(self.lazy)
        state["step"] += 1
        step = float(state["step"])
        rows = self.rows()
        if rows is None:
            rows = torch.arange(self.lazy.shape[0], device=self.lazy.device)
        if not len(rows):
            return
        lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
        weight, grad = self.lazy.index_select(0, rows), self.lazy.grad.index_select(0, rows)
        grad_scale = getattr(self, "grad_scale", None)
        if grad_scale is not None:  # as the fused kernel does for the others (a clip folded into the step)
            grad.div_(grad_scale)
        exp_avg, exp_avg_sq = state["exp_avg"].index_select(0, rows), state["exp_avg_sq"].index_select(0, rows)
        weight.mul_(1 - lr * group["weight_decay"])
        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        denominator = (exp_avg_sq.sqrt() / (1 - beta2**step) ** 0.5).add_(eps)
        weight.addcdiv_(exp_avg, denominator, value=-lr / (1 - beta1**step))
        self.lazy.index_copy_(0, rows, weight)
        state["exp_avg"].index_copy_(0, rows, exp_avg)
        state["exp_avg_sq"].index_copy_(0, rows, exp_avg_sq)
