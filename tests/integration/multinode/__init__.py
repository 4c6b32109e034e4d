"""Multi-node and fault tests: they start their own OpenSearch containers."""
