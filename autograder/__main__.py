"""``python -m autograder``: see :mod:`autograder.cli`."""

import os
import sys
from pathlib import Path

from . import seed
from .cli import main

seed.hide()  # first: the instructor's seed out of this process's /proc/<pid>/environ
# ``python -m`` puts the working folder (often the course, where a submission can write) first
# on sys.path; the kit is found without it unless it lives there.
if Path(__file__).resolve().parents[1] != Path.cwd().resolve():
    sys.path[:] = [p for p in sys.path if p not in ("", os.getcwd())]
sys.exit(main())
