"""`loader apply`: the configuration files rendered into bodies (``render``), the cluster read
(``state``), compared into typed changes (``plan``, pure), then executed (``apply``), with the
ml-commons embedding model for server-side embedding (``ml_model``)."""
