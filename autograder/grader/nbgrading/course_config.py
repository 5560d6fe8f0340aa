"""A course's nbgrader configuration, loaded once, one way, for every part of the grader that
reads it (the exchange's place, collect's owner check, late penalties)."""

from __future__ import annotations

from pathlib import Path


def settings(course: Path):
    """The course's nbgrader configuration, loaded as nbgrader loads it: the Jupyter config
    folders (system-wide first, the user's after) and then the course folder's
    ``nbgrader_config.py``, later files overriding earlier ones. (A late-penalty plugin set in
    the system-wide file applies to the kit's penalties as to nbgrader's own.)"""
    from jupyter_core.paths import jupyter_config_path
    from traitlets.config import Config
    from traitlets.config.loader import PyFileConfigLoader

    merged = Config()
    for folder in [*reversed(jupyter_config_path()), str(course)]:
        if (Path(folder) / "nbgrader_config.py").is_file():
            merged.merge(PyFileConfigLoader("nbgrader_config.py", path=folder).load_config())
    return merged
