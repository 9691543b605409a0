"""Beam processing (filters, dedup, statistics, mask) and the training-shard export."""
