"""`loader eval`: question sets and BEIR datasets (``datasets``), retrieval metrics (``metrics``),
the runs per mode and strategy (``runner``), and the reports and gates (``report``)."""
