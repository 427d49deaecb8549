"""The contraction family's PACK and UNIT knob values, apart from the schedules that take
them (packed.py, dot.py) so that the modules those import, such as widen.py, can name them
too."""

# No packing (the unpacked path), B's panels, or A's and B's.
PACK_NONE, PACK_B, PACK_AB = 0, 1, 2
# Micro-kernel instructions (the row-dot path's value, 3, is rows.py's): FMA micro-kernels
# (narrow operands widened first), dot products of pairs of K, or AMX tile products.
UNIT_FMA, UNIT_DOT, UNIT_AMX = 0, 1, 2
