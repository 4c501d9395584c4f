"""The CPU training attention over groups of rows: each group padded to its own longest row, and
no group's attention scores larger than the caches hold.

Eager attention on a CPU is a chain of passes over a ``rows x heads x longest x longest`` score
tensor (mask, softmax, dropout forward; their backward), and those passes, not the matmuls, are
its time: 32 rows x 384 tokens, MiniLM bf16, one layer forward and backward took about 0.9 s, of
which the matmuls' arithmetic was under a fiftieth. Two things follow, both about the score tensor:

- A packed batch (packed.py) attended on the padded grid, so a random batch paid for its longest
  row's square in every row: rows are sorted by length here and cut into groups, each padded to
  its own longest row (``plan``), which is what length-grouping buys, inside one batch. Paired
  steps on SQuAD windows (python -m benchmarks.packing_steps --workloads qa): a packed random batch
  1.83x faster than before (0.73x of a padded length-grouped one, was 0.40x); SST-2 and CoNLL
  sentences, whose squares are small: unchanged (within the noise).
- A padded batch's attention is cut into chunks of at most ``SCORE_BYTES`` of scores, so that each
  pass works on a part that stays in the caches: the same paired steps, padded length-grouped QA
  1.07x (together with the dropout masks then drawn on two threads, at 9cc4c3e); single-length
  probes of the chunks alone ranged from 1.4x (a first probe in /tmp) to none (its logic in the
  repo, python -m benchmarks.attention_groups) at 384 tokens, the machine's noise being as large.

A group costs a fixed ``GROUP_COST`` more (its own ops, forward and backward), counted in score
elements, so ``plan`` cuts only where it pays. It was 60,000 (about 0.6 ms at about 10 ns an
element); since dropout's masks became multipliers (engine/cpu_kernels.py) a score element costs
far less and fewer, larger groups pay. Random packed batches, paired step by step under each value
(``python -m benchmarks.group_cost --costs 60000,600000,1200000``, benchmarks/results/group_cost.md):
1,200,000 against 60,000 ran SST-2 1.07x, CoNLL 1.13x and SQuAD windows 1.26x faster (600,000:
1.09x, 1.12x, 1.20x), with about one group a sentence batch (2.6-3.1 before) and 4 a window batch
(12 before). Measured on 2 cores (AMX), bf16, 12 heads of 32.

Short rows share grid rows (``bins``, ``layout``): with one group a sentence batch, a random batch
still paid its longest row's square in every row (SST-2's first 4,000 sentences: 3-57 tokens, 13.3
on average; CoNLL's: 3-77, 19.3). Rows are put in bins of the group's longest row, first-fit
decreasing, and a bin is one grid row under a block-diagonal mask (``RowGroup.additive_mask``): a
random SST-2 batch of 32 rows needs 11.2 grid rows on average, a CoNLL one 13.0, their score
elements 2.2x and 2.0x the sum of the rows' own squares (``plan``'s groups, one row a grid row: 6.5x
and 4.8x). With bins the sentence batches are one group under any GROUP_COST from 300,000 to
2,400,000, and SQuAD windows ran alike at 1,200,000 and 2,400,000 (group_cost --costs
300000,1200000,2400000 --name group_cost_bins). Paired
steps (python -m benchmarks.packing_steps --rows 4000 --name packing_steps_bins): packed random
batches against padded length-grouped ones SST-2 0.74x -> 0.82x, CoNLL 0.74x -> 0.83x (the arm
"packed random, rows apart" is the layout before bins). Each row attends to
its own tokens only, as before; outputs and gradients equal the one-group ones up to float rounding
(tests/unit/test_packed_heads.py, tests/unit/test_attention_groups.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from bertkit.networks.packed import additive_mask

SCORE_BYTES = 32 << 20  # the most attention scores (rows x heads x longest^2 x item size) one group holds
GROUP_COST = 1_200_000  # one more group's overhead, in score elements (see above)
UNITS = 64  # the most units plan() cuts between


def plan(lengths: list[int], heads: int, itemsize: int) -> list[list[int]]:
    """Row indices in groups, shortest rows first, that minimise the groups' score elements plus
    ``GROUP_COST`` each, no group above ``SCORE_BYTES`` unless it is one unit. Groups of rows
    adjacent in length order are optimal for that cost (a longer row never helps a shorter group),
    so this is a shortest path over cut points. A unit is one row, or, in a batch of more than
    ``UNITS`` rows, a run of neighbours in length order (cut points between units only: the search
    is quadratic, and 1,024 rows one by one took 0.13 s a batch)."""
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    size = -(-len(order) // UNITS)  # rows a unit
    units = [order[i : i + size] for i in range(0, len(order), size)]
    best, cut = [0.0] + [math.inf] * len(units), [0] * (len(units) + 1)
    for end in range(1, len(units) + 1):
        per_row = heads * lengths[units[end - 1][-1]] ** 2  # the group's longest row is its last
        rows = 0
        for start in range(end - 1, -1, -1):
            rows += len(units[start])
            if start < end - 1 and rows * per_row * itemsize > SCORE_BYTES:
                break  # longer groups ending here only grow
            cost = best[start] + GROUP_COST + rows * per_row
            if cost < best[end]:
                best[end], cut[end] = cost, start
    groups, end = [], len(units)
    while end:
        groups.append([row for unit in units[cut[end] : end] for row in unit])
        end = cut[end]
    return groups[::-1]


def padded_chunks(rows: int, heads: int, queries: int, keys: int, itemsize: int) -> int:
    """How many equal chunks of rows a padded batch's attention runs in (``SCORE_BYTES`` each at most)."""
    return max(1, min(rows, math.ceil(rows * heads * queries * keys * itemsize / SCORE_BYTES)))


def bins(lengths: list[int], rows: list[int], capacity: int) -> list[list[int]]:
    """``rows`` in bins of at most ``capacity`` tokens, longest rows first, each into the first bin it
    fits (first-fit decreasing): the grid rows a group of short rows needs when several share one."""
    free: list[int] = []
    held: list[list[int]] = []
    for row in sorted(rows, key=lengths.__getitem__, reverse=True):
        place = next((i for i, room in enumerate(free) if room >= lengths[row]), len(free))
        if place == len(free):
            free.append(capacity)
            held.append([])
        free[place] -= lengths[row]
        held[place].append(row)
    return held


def layout(lengths: list[int], heads: int, itemsize: int) -> list[list[list[int]]]:
    """Groups of bins of row indices: ``plan``'s groups, each group's rows in ``bins`` of its longest
    row, or the whole batch in bins of its longest row, whichever holds fewer score elements (plus
    ``GROUP_COST`` a group). A bin of several rows is a block-diagonal grid row: each row still attends
    to its own tokens only (``RowGroup.additive_mask``)."""
    planned = [bins(lengths, group, max(lengths[r] for r in group)) for group in plan(lengths, heads, itemsize)]
    candidates = [planned]
    longest = max(lengths)
    whole = bins(lengths, list(range(len(lengths))), longest)
    if len(whole) * heads * longest**2 * itemsize <= SCORE_BYTES:
        candidates.append([whole])
    return min(candidates, key=lambda groups: _score_cost(lengths, groups, heads))


def _score_cost(lengths: list[int], groups: list[list[list[int]]], heads: int) -> int:
    return sum(GROUP_COST + len(group) * heads * max(lengths[r] for b in group for r in b) ** 2 for group in groups)


@dataclass
class RowGroup:
    """Some rows of a packed batch on their own ``grid_rows x longest`` grid: ``tokens`` are their
    tokens' places in the packed row, row by row, ``cells`` the same tokens' flat places in the grid.
    A grid row holds one row, or, binned (``segments`` set), several rows one after another."""

    tokens: torch.Tensor
    cells: torch.Tensor
    grid_rows: int
    longest: int
    keep: torch.Tensor  # grid rows x longest, True on real tokens
    # each cell's token in the packed row; a padding cell's is token 0's (finite: masked as a key, never read
    # as a query, so its gradient is exactly 0): one gather fills the grid, no zeros written and scattered into
    sources: torch.Tensor
    segments: torch.Tensor | None = None  # grid rows x longest: the row a cell holds (-1: padding); None: one a row
    masks: dict = field(default_factory=dict, repr=False, compare=False)  # additive_mask's by dtype: every layer asks

    def padded(self, x: torch.Tensor) -> torch.Tensor:
        """``(1, heads, total, d)`` packed -> ``(grid rows, heads, longest, d)``: one gather (``sources``);
        a padding cell holds a copy of a real token, masked as a key and never read as a query."""
        grid = x[0].transpose(0, 1).index_select(0, self.sources)
        return grid.view(self.grid_rows, self.longest, *grid.shape[1:]).transpose(1, 2)

    def flat(self, x: torch.Tensor) -> torch.Tensor:
        """``(grid rows, heads, longest, d)`` -> ``(grid rows x longest, heads, d)``, cell by cell as ``cells``."""
        return x.transpose(1, 2).reshape(self.grid_rows * self.longest, x.shape[1], x.shape[3])

    def additive_mask(self, dtype: torch.dtype) -> torch.Tensor:
        """``(grid rows, 1, 1, longest)`` over the keys; binned, ``(grid rows, 1, longest, longest)``: a query sees the
        keys of its own row only (a padding cell's query the padding cells: its output is never read)."""
        if dtype not in self.masks:
            self.masks[dtype] = self._additive_mask(dtype)
        return self.masks[dtype]

    def _additive_mask(self, dtype: torch.dtype) -> torch.Tensor:
        if self.segments is None:
            return additive_mask(self.keep, dtype)
        # a row's query sees its row's keys; a padding cell's query the padding cells of its grid row (so
        # no query sees none: a fully masked row is -inf in fp16, NaN after the softmax); never read, 0 gradient
        same = self.segments[:, :, None] == self.segments[:, None, :]
        mask = torch.zeros(same.shape, dtype=dtype, device=same.device)
        return mask.masked_fill_(~same, torch.finfo(dtype).min)[:, None]


def row_groups(packing, heads: int, itemsize: int) -> list[RowGroup] | None:
    """``packing``'s rows in ``layout``'s groups; None when one group of every row, in row order, one a
    grid row, is the layout. Planned once a batch: every layer's attention asks again, the answer is kept."""
    if (heads, itemsize) not in packing.plans:
        packing.plans[heads, itemsize] = _row_groups(packing, heads, itemsize)
    return packing.plans[heads, itemsize]


def _row_groups(packing, heads: int, itemsize: int) -> list[RowGroup] | None:
    lengths = packing.keep.sum(1).tolist()
    groups = layout(lengths, heads, itemsize)
    if len(groups) == 1 and all(len(b) == 1 for b in groups[0]):
        return None
    starts = [0]
    for length in lengths[:-1]:
        starts.append(starts[-1] + length)  # where each row's tokens begin in the packed row
    return [_group(group, lengths, starts, packing.keep.device) for group in groups]


def _group(group: list[list[int]], lengths: list[int], starts: list[int], device) -> RowGroup:
    """A group's grid: bin ``b``'s rows one after another on grid row ``b``."""
    rows, grid_row, offset = [], [], []
    for b, held in enumerate(group):
        at = 0
        for row in held:
            rows.append(row)
            grid_row.append(b)
            offset.append(at)
            at += lengths[row]
    longest = max(sum(lengths[r] for r in held) for held in group)
    counts = torch.tensor([lengths[r] for r in rows], device=device)
    local = torch.repeat_interleave(torch.arange(len(rows), device=device), counts)
    column = torch.arange(int(counts.sum()), device=device) - (counts.cumsum(0) - counts)[local]
    place = torch.tensor(grid_row, device=device) * longest + torch.tensor(offset, device=device)
    cells = place[local] + column
    tokens = torch.tensor([starts[r] for r in rows], device=device)[local] + column
    keep = torch.zeros(len(group) * longest, dtype=torch.bool, device=device).index_fill_(0, cells, True)
    sources = torch.zeros(len(group) * longest, dtype=torch.long, device=device).index_copy_(0, cells, tokens)
    segments = None
    if len(rows) > len(group):
        segments = torch.full((len(group) * longest,), -1, device=device).index_copy_(0, cells, local)
        segments = segments.view(len(group), longest)
    return RowGroup(tokens, cells, len(group), longest, keep.view(len(group), longest), sources, segments)


def places(packing, heads: int, itemsize: int) -> torch.Tensor:
    """Where each token of the packed row sits in ``row_groups``' grids laid end to end (a spare token:
    cell 0, never read): one gather puts the attention's outputs back in packed order. Kept on the packing."""
    key = ("places", heads, itemsize)
    if key not in packing.plans:
        found = torch.zeros(packing.total, dtype=torch.long, device=packing.keep.device)
        offset = 0
        for group in row_groups(packing, heads, itemsize):
            found.index_copy_(0, group.tokens, group.cells + offset)
            offset += group.grid_rows * group.longest
        packing.plans[key] = found
    return packing.plans[key]
