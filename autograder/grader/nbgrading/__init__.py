"""nbgrader's side: real ``nbgrader autograde`` on one submission, and the course around it.

* :mod:`.nbgrader_run` -- one submission through ``nbgrader autograde``, with a
  :class:`~autograder.grader.session.session.Session` serving its hidden test cells;
* :mod:`.grading_config` -- the configuration the grader adds to the course's own;
* :mod:`.scratch_course` -- a throw-away copy of the course per submission, its grade merged back;
* :mod:`.course_config` -- a course's nbgrader configuration, loaded one way for every reader;
* :mod:`.exchange` -- nbgrader's exchange as the grading service uses it;
* :mod:`.feedback` -- each learner's feedback page, next to nbgrader's.

Which process runs it: the process that grades one submission -- the grader's process for
``check`` and ``grade`` (one at a time), or a grading slot's process -- which starts ``nbgrader``
in a child process of its own; :mod:`.grading_config` is read by that ``nbgrader`` process, as its
config file. The merge into the real gradebook, the exchange and the feedback pages run in the
process that started ``grade`` or ``serve`` (the gradebook's one writer).
"""
