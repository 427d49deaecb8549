"""`python -m mlirtune` runs the command-line interface."""

import sys

from mlirtune.cli import main

sys.exit(main())
