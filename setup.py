"""The build's one addition to pyproject.toml: a wheel carries the learner notebooks.

Each check's points are written once, in its test cell's nbgrader metadata
(``autograder/checks/points.py``). A kit installed from a wheel -- a fresh Colab runtime's setup
cell, a student bundle installed with pip -- has no ``solutions/`` or ``labs/`` beside it, so the
wheel carries ``labs/<lab>/<lab>.ipynb`` (no answers in them) as ``autograder/notebooks/<lab>.ipynb``.
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


class BuildPy(build_py):
    """``build_py``, then the learner notebooks into the built ``autograder`` package."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):  # an editable install reads them where they are
            return
        target = Path(self.build_lib) / "autograder" / "notebooks"
        self.mkpath(str(target))
        for notebook in sorted(HERE.glob("labs/*/*.ipynb")):
            self.copy_file(str(notebook), str(target / notebook.name))


setup(cmdclass={"build_py": BuildPy})
