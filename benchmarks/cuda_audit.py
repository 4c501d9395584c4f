"""Where bertkit's host waits on a GPU: run `bertkit ARGS...` in this process.

`MODE=sync python -m benchmarks.cuda_audit finetune rerank ...` (the default mode) turns on CUDA's
sync debug mode and prints each Python place that made the host wait for the GPU, with its count
(a count equal to the steps is a wait every step). `MODE=profile` runs torch.profiler over the run
and prints the top operations by host time and by device time. Used by benchmarks/device_rerank_loop.sh.
"""

import collections
import os
import sys
import traceback
import warnings

import torch

mode = os.environ.get("MODE", "sync")
seen = collections.Counter()


def show(message, category, filename, lineno, file=None, line=None):
    if "synchroniz" not in str(message):
        return
    stack = [f for f in traceback.extract_stack()[:-1] if "warnings" not in f.filename]
    frames = [f"{f.filename.split('site-packages/')[-1].split('/work/')[-1]}:{f.lineno} {f.name}" for f in stack[-6:]]
    seen[" <- ".join(reversed(frames))] += 1


sys.argv = ["bertkit", *sys.argv[1:]]
from bertkit.cli import main  # noqa: E402

if mode == "sync":
    warnings.showwarning = show
    warnings.simplefilter("always")
    torch.cuda.set_sync_debug_mode("warn")
    try:
        main()
    except SystemExit:
        pass
    finally:
        torch.cuda.set_sync_debug_mode(0)
        for where, n in seen.most_common(25):
            print(f"{n:6d}  {where}")
else:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        try:
            main()
        except SystemExit:
            pass
    table = prof.key_averages()
    print(table.table(sort_by="self_cpu_time_total", row_limit=30, max_name_column_width=60))
    print(table.table(sort_by="self_cuda_time_total", row_limit=15, max_name_column_width=60))
