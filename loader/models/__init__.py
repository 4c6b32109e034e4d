"""The models the client runs: the embedding model (``embedding``), the cross-encoder of the
rerank (``rerank``), and the ONNX export both use (``onnx_export``)."""
