# Sourced by the device scripts (device_rerank.sh, device_rerank_loop.sh) on a lent GPU machine:
# installs the carried wheels into /tmp/site and puts MiniLM's carried fp16 weights back to fp32
# (90 MB of fp32 exceeds the 64 MiB carry; both sides then start from the same fp16-rounded weights).
# Needs $gpu (benchmarks/work/gpu, prepared as device_rerank.sh says).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$gpu"/whl/*.whl
python3 - "$gpu/minilm/" <<'PY'
import sys
from safetensors.torch import load_file, save_file
d = sys.argv[1]
save_file({k: v.float() for k, v in load_file(d + "model16.safetensors").items()}, d + "model.safetensors", metadata={"format": "pt"})
PY
rm "$gpu/minilm/model16.safetensors"
nvidia-smi -L
