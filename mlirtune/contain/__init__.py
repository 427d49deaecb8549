"""Contained compiles: no lowering, JIT compile or kernel can take the machine down, or end
the `mlirtune` command without one line saying what happened.

Lowering and JIT compilation run in C++ while the MLIR bindings hold the GIL, so nothing in
the compiling process can watch them. The command therefore runs in a child process
(`supervisor.supervise`): the parent imports nothing heavy, waits, and reports. The child
records the stage it is in to a small file the parent reads (`stages`), and while a
compile runs (`stages.compiling`), the kernel enforces its limits:
- its address space may grow by the compile ceiling (RLIMIT_AS), so a runaway allocation
  fails inside the compile instead of exhausting the machine;
- an interval timer ends the process (SIGALRM) once the compile time limit has passed.
A compile that fails either way, or aborts in C++ (an assertion, `std::bad_alloc`, an LLVM
fatal error), or a kernel that crashes, ends the child; the parent prints one error line
naming the stage and the reason and exits 2. C++'s own messages go to a log the parent
reads, never to the terminal half-way through a line of ours.

Library callers are not contained unless they ask (`supervisor.call_contained`): their
process is theirs.
"""

from mlirtune.contain.stages import compiling, running

__all__ = ["compiling", "running"]
