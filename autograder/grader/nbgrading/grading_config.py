"""nbgrader configuration the grader adds to the course's own while it autogrades.

Given as ``--JupyterApp.config_file`` (nbgrader ignores ``--config``; the course directory's
``nbgrader_config.py`` is still read).

A hidden test cell (``autograder.grade(...)``) waits while the grader measures the learner's
code, and the grader bounds every call of that code itself (``AUTOGRADER_CALL_TIMEOUT_S``). So
such a cell gets the whole submission's time limit, not the cell limit meant for the
notebook's own cells: a measurement that outlasts the cell limit is not cut off halfway.
"""

from autograder.grader.nbgrading.nbgrader_run import cell_timeout

c = get_config()  # noqa: F821 -- traitlets provides it to a config file
c.Execute.timeout_func = cell_timeout
