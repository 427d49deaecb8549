"""Tuning on a Ray cluster: candidates compiled and timed by actors across its nodes, one
search per CPU class (`mlirtune tune --ray [ADDRESS] [--per-class]`). Ray is an extra
(`mlirtune[ray]`), imported only when a fleet is used."""
