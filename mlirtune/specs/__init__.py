"""Tuning-spec libraries: transform modules that carry tuned configs per op."""
