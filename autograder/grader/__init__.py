"""The grader's side: code that runs in the grader's own processes, never in a learner's.

One package per job, each naming in its docstring the process its code runs in; each imports
only the packages listed before it (and :mod:`.errors`), which ``tests/test_layers.py``'s
acyclic contract holds:

* :mod:`.isolation` -- the sandbox, its control group and syscall filter, the work folder, the
  processes a submission leaves behind, the neighbours frozen while a tier is measured again,
  the grader's untraceable Ray workers;
* :mod:`.session` -- one grading session: the grader's verdicts, the reference process, the
  kernel's launcher;
* :mod:`.nbgrading` -- nbgrader's side: ``nbgrader autograde`` on one submission, the scratch
  course, the exchange, feedback pages;
* :mod:`.engine` -- a cohort graded (``grade``), here or in a Ray's grading slots, resumed,
  reported; ``calibrate``'s sessions;
* :mod:`.service` -- the grading service (``serve``): intake, the fair queue, the status page;
* :mod:`.errors` -- the grader's own errors, shared by every command.

Nothing under :mod:`autograder.grader` may be imported by kernel-side code.
"""
