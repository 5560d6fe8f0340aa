"""One grading session: the grader's end of the channel and the two processes it talks to.

* :mod:`.session` -- the :class:`~.session.Session`: this run's seed, each check run once when a
  hidden test cell asks, the verdicts that are the grade;
* :mod:`.catalog` -- each lab's checks and reference implementations, found by lab id;
* :mod:`.reference_process` -- the lab's reference in a process of its own, driven like a
  learner's kernel (and, for a Ray lab, the lab's Ray in its sandbox);
* :mod:`.kernel_launcher` -- the grading kernel's launcher, which nbgrader starts and which
  replaces itself with the sandboxed kernel.

Which process runs it: :mod:`.session` and :mod:`.catalog` run in the grader's process -- the
one ``python -m autograder check`` or ``grade`` started, or a grading slot's process -- and, for a
learner's own self-check (``autograder.check()``), in the learner's kernel, on purpose.
:mod:`.reference_process` runs in the reference process (``python -m`` of it, started by the
session); :mod:`.kernel_launcher` in the launcher process nbgrader starts for the kernel, as root
until it becomes the sandboxed kernel. Builds on :mod:`autograder.grader.isolation` only.
"""
