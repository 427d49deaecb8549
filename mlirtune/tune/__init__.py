"""Autotuning: search spaces (knobs + z3 constraints), strategies, isolated evaluation and
the tuning database."""
