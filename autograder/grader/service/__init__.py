"""The grading service: ``python -m autograder serve`` grades each submission as it arrives.

* :mod:`.serve` -- the loop: new submissions from nbgrader's exchange, the queue, a free slot,
  the grade, the feedback released;
* :mod:`.submission_queue` -- fair across students, latest submission counts, rate-limited, on disk;
* :mod:`.intake` -- what the service refuses before it grades anything, and the message why;
* :mod:`.status_page` -- each student's own submissions, behind the hub's login.

Which process runs it: the service process, one per course (the gradebook's one writer, as
``grade`` is); :mod:`.status_page` serves in a thread of it. Grading itself goes through
:mod:`autograder.grader.engine`, in this process or in grading slots.
"""
