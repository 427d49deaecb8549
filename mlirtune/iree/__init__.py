"""IREE as an engine and a tuning target: compile workloads with `iree-compile` for its
llvm-cpu backend, run them on its local-sync runtime, and search the lowering configs of
their dispatches, handed back as tuning specs `iree-compile` applies.

IREE's compiler bindings and this project's MLIR bindings cannot share a process (each
brings its own MLIR and nanobind), so everything that reads or writes IREE's IR runs in a
child process (`spec_tool.py`, `iree-compile`); the runtime (`iree.runtime`) loads here.
Needs the `iree` extra: `pip install 'mlirtune[iree]'`.
"""
