"""Curating tuning-spec libraries, above the tuner: turning the tuner's verdicts into
library entries (export), racing the shipped classes' entries on this host (adapt), and
checking a library's entries against this host (check). Compiling imports none of it:
looking entries up is mlirtune.specs, a floor below.
"""
