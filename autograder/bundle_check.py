"""Self-check without the answer keys: run a notebook in a kernel, then ``autograder.check()``.

A student bundle (``python -m autograder release``) has no hidden tests and no reference
implementations, so ``python -m autograder check`` cannot build an nbgrader course there.
It runs the notebook as the learner would (nbclient, every cell, errors kept), then the
lab's checks on the notebook's own objects in the same kernel -- every check that does not
need the reference; the others are listed as measured only by the instructor's grading.
This is a learner's preview, not a grade: it runs where the learner's code runs.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from .grader.nbgrading.nbgrader_run import cell_errors
from .report import Outcome
from .report import Result

REPORT = "-- autograder report --"
CHECK_CELL = f"import autograder\nprint({REPORT!r})\nautograder.check(as_json=True)"


def grade_in_kernel(notebook: Path, lab: str, *, cell_timeout_s: float = 240, **_limits) -> Outcome:
    """Execute ``notebook`` with this interpreter's kernel, then its lab's checks; the outcome."""
    import nbformat
    from ipykernel.kernelspec import write_kernel_spec
    from jupyter_client import KernelManager
    from jupyter_client.kernelspec import KernelSpecManager
    from nbclient import NotebookClient

    from .static_check import check_notebook

    started = time.monotonic()
    nb = nbformat.read(str(notebook), as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(CHECK_CELL))
    with tempfile.TemporaryDirectory(prefix="autograder-selfcheck-") as tmp:
        # this interpreter's own kernel (a venv's), whatever kernelspecs the machine has
        write_kernel_spec(Path(tmp, "kernels", "kit"))
        km = KernelManager(kernel_name="kit", kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(Path(tmp, "kernels"))]))
        client = NotebookClient(nb, km=km, timeout=cell_timeout_s, allow_errors=True, interrupt_on_timeout=True,
                                resources={"metadata": {"path": str(notebook.resolve().parent)}})
        client.execute()
        check = nb.cells.pop()  # the check cell: what it printed is the report
        executed = Path(tmp, "executed")
        executed.mkdir()
        nbformat.write(nb, str(executed / notebook.name))
        raised = cell_errors(executed)
    results, error = _report(check)
    return Outcome("learner", lab, results, error=error, cell_errors=raised,
                   findings=[str(f) for f in check_notebook(notebook)], seconds=time.monotonic() - started)


def _report(cell) -> tuple[list[Result], str]:
    """The check cell's JSON report as results, or why there is none (the cell's error)."""
    for out in cell.get("outputs", []):
        if out.get("output_type") == "error":
            return [], f"autograder.check() failed: {out.get('ename')}: {out.get('evalue')}"[:300]
    text = "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream"
                   and o.get("name") == "stdout")
    try:
        report = json.loads(text.rpartition(REPORT)[2])
    except ValueError:
        return [], "autograder.check() printed no report (did the kernel die?)"
    return [Result(**r) for r in report["checks"]], ""
