"""The embedding model: loaded once, run on a thread of its own, queries cached.

`embedder.py` serves the vault; `onnx_model.py` runs the model on ONNX
Runtime; `onnx_cache.py` exports it once from sentence-transformers, which
`torch_model.py` loads. It may import model only.
"""
