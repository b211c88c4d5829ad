"""``python -m arlkit`` runs the command line."""

import sys

from arlkit.cli import main

sys.exit(main())
