"""The grader's own errors, shared by every command (``check``, ``grade``, ``serve``, ``release``)."""


class SetupError(Exception):
    """The course directory or the assignment is not usable (a usage error, exit code 2)."""
