"""Training code: what learns from judgments."""
