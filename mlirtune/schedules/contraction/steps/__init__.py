"""The contraction family's own IR rewrites, which descriptors run as steps between passes:
its operands widened before the schedule, the prefetches its packed nest marks, the pair
products and AMX tiles of its bf16 and int8 paths."""
