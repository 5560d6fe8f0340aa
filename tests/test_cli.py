"""The CLI's exit codes: 2 for the user's mistakes only, never for the kit's own bugs."""

from __future__ import annotations

import pytest

from autograder import calibrate, cli


def test_unknown_lab_is_a_usage_error(capsys):
    assert cli.main(["calibrate", "99_no_such_lab"]) == 2
    assert "no lab '99_no_such_lab' in this kit" in capsys.readouterr().err


def test_a_grader_bug_is_not_a_usage_error(monkeypatch):
    """A ``KeyError`` raised inside the grader is the kit's bug: it keeps its traceback
    (exit code 1 from Python), instead of reading as the user's mistake (it was exit 2)."""
    def broken(*args, **kwargs):
        raise KeyError("a grader bug")

    monkeypatch.setattr(calibrate, "run", broken)
    with pytest.raises(KeyError, match="a grader bug"):
        cli.main(["calibrate", "00_measure"])
