"""Procedural memory: pattern specs, their lifecycle (confidence, decay, maturity), ranking,
feedback and the review queue."""
