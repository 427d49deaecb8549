"""The contraction family's PACK knob values, apart from the packed schedule (packed.py) so
that the modules it imports, such as widen.py, can name them too."""

# No packing (the unpacked path), B's panels, or A's and B's.
PACK_NONE, PACK_B, PACK_AB = 0, 1, 2
