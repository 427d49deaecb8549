"""`python -m mlirtune` runs the command-line interface, contained (mlirtune.contain)."""

import sys

from mlirtune.cli import command

sys.exit(command())
