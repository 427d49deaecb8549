"""Measurement: native timer loop, adaptive sampling, statistics and the numpy baseline."""
