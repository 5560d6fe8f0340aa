"""``python -m autograder``: see :mod:`autograder.cli`."""

import sys

from . import seed
from .cli import main

seed.hide()  # first: the instructor's seed out of this process's /proc/<pid>/environ
sys.exit(main())
