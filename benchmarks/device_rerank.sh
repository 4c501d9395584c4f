#!/usr/bin/env bash
# The rerankers side by side at a larger budget on a lent GPU machine (results/retrieval_gpu.{md,json}).
# That machine cannot reach the Hub or PyPI and takes at most 64 MiB of ignored files along, so
# benchmarks/work/gpu/ (ignored) is prepared here first:
#   whl/          wheels it lacks: datasets, dill, multiprocess, pytrec_eval_terrier, tokenizers 0.23.3,
#                 sentence-transformers 6.2.0 (`pip download --no-deps ...`)
#   minilm/       the bundled MiniLM directory with its weights stored as fp16 in model16.safetensors
#                 (90 MB of fp32 does not fit; they go back to fp32 below, so both sides start from
#                 the same fp16-rounded weights)
#   data/squad/dev-v1.1.json
# then, from the device tool: `BUDGET=500 RQ=5000 bash benchmarks/device_rerank.sh` with
# carry ["benchmarks/work/gpu"]; the log and the results come back under $OUT.
set -uo pipefail
root=$PWD
gpu=$root/benchmarks/work/gpu
source "$root/benchmarks/device_setup.sh"  # wheels, fp32 weights
export PYTHONPATH=/tmp/site BERTKIT_DATA_DIR=$gpu/data
python3 -c "import torch, transformers, sentence_transformers as s, tokenizers as t; print(torch.__version__, transformers.__version__, s.__version__, t.__version__)"
rm -rf /tmp/rg
timeout "${BUDGET:-520}" python3 -m benchmarks.retrieval --model "$gpu/minilm" --train-pairs 2000 \
  --rerank-queries "${RQ:-8582}" --negatives 3 --rerank-eval-queries 500 --rerank-seeds 43,44 \
  --precision bf16 --st-precision bf16 --threads 16 --name retrieval_gpu --work /tmp/rg 2>&1 | tee "$OUT/log.txt"
cp benchmarks/results/retrieval_gpu.* "$OUT/" 2>/dev/null
echo done
