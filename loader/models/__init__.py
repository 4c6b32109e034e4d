"""The models the client runs: the embedding model (``embedding``, with what each known model
needs in ``registry``, jar-shipped models in ``artifacts``, the onnxruntime backend in
``onnx_embedding``), the rerankers behind one protocol (``rerank/``: the cross-encoder, the
keyword reranker, the learned LambdaMART model and its features), and their ONNX files: the
embedding model's written from its weights without torch (``bert_onnx``, cached by ``onnx_file``
and packaged for ml-commons by ``embedding_export``), the cross-encoder's traced with torch
(``onnx_export``)."""
