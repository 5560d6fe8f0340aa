"""What keeps learner code in its box, and the grader's own processes out of its reach.

* :mod:`.sandbox` -- the OS sandbox (bubblewrap, its own users and namespaces, ``setpriv``,
  ``prlimit``) every process that runs learner code starts in;
* :mod:`.cgroup` -- the control group one grading's sandboxes share (``pids`` and ``memory``,
  tmpfs pages included); :mod:`.syscalls` -- the seccomp filter loaded into every sandbox;
* :mod:`.workspace` -- a grading's size-capped work folder;
* :mod:`.processes` -- nothing a submission starts outlives it (the grader as subreaper);
* :mod:`.neighbours` -- the other gradings on this machine frozen (their control groups) while a
  tier one of them may have cost is measured again;
* :mod:`.ray_job` -- the grader's Ray workers made untraceable by learner code.

Which process runs it: the one that starts a sandbox, as root and before any learner code runs
-- the grader's process for ``check`` and ``grade``, a grading slot's process, the reference
process, ``calibrate``'s -- and what it sets up is then inherited by the sandboxed processes
themselves (the filter, the group, the limits). :mod:`.ray_job`'s hook runs in every Ray worker
of the grader's own Ray jobs. Imports no other package of the grader: everything above builds on it.
"""
