"""`bertkit export onnx`: ONNX models of a model directory and the ONNX Runtime backend (the `onnx` extra)."""
