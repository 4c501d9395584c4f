"""On CUDA the forward passes run without cuDNN attention (engine/gpu_attention.py says why);
elsewhere nothing changes. The flags are process-wide, so they are checked here on any machine."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from bertkit.engine.gpu_attention import varying_shape_attention  # noqa: E402


def _flags():
    cuda = torch.backends.cuda
    return cuda.cudnn_sdp_enabled(), cuda.flash_sdp_enabled(), cuda.mem_efficient_sdp_enabled(), cuda.math_sdp_enabled()


def test_cuda_forward_passes_leave_out_cudnn_attention_and_restore_the_flags():
    before = _flags()
    assert before[0], "PyTorch's default has cuDNN attention on"
    with varying_shape_attention(torch.device("cuda")):
        assert _flags() == (False, True, True, True)
    assert _flags() == before


def test_off_cuda_the_attention_flags_stay_as_they_are():
    before = _flags()
    for device in ("cpu", "meta"):
        with varying_shape_attention(torch.device(device)):
            assert _flags() == before
