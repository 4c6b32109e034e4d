"""Talking to OpenSearch: the client and its error translation (``client``), and the local
single node of ``loader up`` / ``loader down`` (``local``)."""
