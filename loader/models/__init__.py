"""The models the client runs: the embedding model (``embedding``, with what each known model
needs in ``registry``, jar-shipped models in ``artifacts``, the onnxruntime backend in
``onnx_embedding``), the cross-encoder of the rerank (``rerank``), and the ONNX exports both use
(``onnx_export``; ``embedding_export`` also packages the embedding model for ml-commons)."""
