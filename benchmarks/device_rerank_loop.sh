#!/usr/bin/env bash
# bertkit's reranker training loop on a lent GPU, beside sentence-transformers' CrossEncoderTrainer
# and an older bertkit (results/rerank_gpu_loop.md). Unlike device_rerank.sh it trains on rows
# prepared here and scores nothing: it times the loops and shows where the host waits.
# Prepared first in benchmarks/work/gpu/ (ignored; the device takes at most 64 MiB along):
#   whl/, minilm/ (fp16 weights)  as for device_rerank.sh
#   rerank-rows.jsonl.gz          benchmarks.retrieval's rerank_rows() for 5,000 train questions and
#                                 3 mined negatives each (18,152 rows), gzipped
#   old/bertkit/                  the bertkit to compare against: `git archive COMMIT bertkit | tar -x -C old`
# then, from the device tool: `bash benchmarks/device_rerank_loop.sh` with carry ["benchmarks/work/gpu"].
# AUDIT=1 adds CUDA's sync debug mode over 60 steps of both bertkits (benchmarks/cuda_audit.py).
set -uo pipefail
root=$PWD
gpu=$root/benchmarks/work/gpu
source "$root/benchmarks/device_setup.sh"  # wheels, fp32 weights
gunzip -c "$gpu/rerank-rows.jsonl.gz" > /tmp/rows.jsonl
wc -l /tmp/rows.jsonl
ARGS="finetune rerank --data /tmp/rows.jsonl --model $gpu/minilm --overwrite --epochs 1 --batch-size 32 --lr 2e-5 --seed 42 --max-length 256 --warmup-ratio 0.1 --weight-decay 0.01 --precision bf16 --threads 16"
since() { python3 -c "import sys,time; print(round(time.time()-float(sys.argv[1]),1))" "$1"; }
loop() { python3 -c "import json,sys; t=json.load(open(sys.argv[1]+'/bertkit.json'))['throughput']; print(sys.argv[2], 'loop_s', t['train_seconds'], 'steps', t['optimizer_steps'])" "$1" "$2"; }
if [ -n "${AUDIT:-}" ]; then
  echo "== sync audit, new (60 steps)"
  PYTHONPATH=$root:/tmp/site MODE=sync timeout 150 python3 -m benchmarks.cuda_audit $ARGS --output /tmp/audit-new --max-train-samples 1920 2>&1 | grep -v Warning | tail -28
  echo "== sync audit, old (60 steps)"
  PYTHONPATH=$gpu/old:$root:/tmp/site MODE=sync timeout 150 python3 "$root/benchmarks/cuda_audit.py" $ARGS --output /tmp/audit-old --max-train-samples 1920 2>&1 | grep -v Warning | tail -28
fi
echo "== timing: new, ST, old (whole file)"
s=$(date +%s.%N); PYTHONPATH=$root:/tmp/site timeout 200 python3 -m bertkit $ARGS --output /tmp/bk-new > /tmp/bk-new.log 2>&1; echo "new rc $? process_s $(since $s)"; loop /tmp/bk-new new
s=$(date +%s.%N); PYTHONPATH=$root:/tmp/site timeout 200 python3 -m benchmarks.retrieval --worker "{\"kind\": \"rerank\", \"data\": \"/tmp/rows.jsonl\", \"out\": \"/tmp/st-rerank\", \"threads\": 16, \"epochs\": 1, \"batch_size\": 32, \"lr\": 2e-05, \"seed\": 42, \"st_precision\": \"bf16\", \"model\": \"$gpu/minilm\", \"max_length\": 256}" 2>&1 | tail -1; echo "st process_s $(since $s)"
s=$(date +%s.%N); (cd "$gpu/old" && PYTHONPATH=$gpu/old:/tmp/site timeout 200 python3 -m bertkit $ARGS --output /tmp/bk-old > /tmp/bk-old.log 2>&1); echo "old rc $? process_s $(since $s)"; loop /tmp/bk-old old
echo "== profile, new (60 steps)"
PYTHONPATH=$root:/tmp/site MODE=profile timeout 150 python3 -m benchmarks.cuda_audit $ARGS --output /tmp/prof-new --max-train-samples 1920 2>&1 | grep -v Warning | tail -60
tail -3 /tmp/bk-new.log
echo done
