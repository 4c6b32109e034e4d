"""`loader push`: files read into documents (``readers``), cut into chunks (``chunking``), planned
against the index (``plan``, pure) and synced in bulk (``sync``, ``bulk``)."""
