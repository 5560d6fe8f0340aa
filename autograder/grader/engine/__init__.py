"""The grading engine: a cohort graded once each, here or in the grading slots of a Ray.

* :mod:`.engine` -- the one :class:`~.engine.Engine` ``grade`` and ``serve`` drive: a job, its
  recorded grade, a backend;
* :mod:`.cohort` -- ``python -m autograder grade``; :mod:`.cohort_report` -- ``report``'s page;
* :mod:`.resume` -- what has been graded already, under which fingerprint;
* :mod:`.settle` -- a graded submission's last steps; :mod:`.limits` -- what one grading may take;
* :mod:`.pool` -- submissions sent to a Ray's grading slots, results collected;
* :mod:`.slots` -- which cores a slot gets; :mod:`.slot_worker` -- the grading inside a slot;
* :mod:`.fair_timing` -- ``calibrate --workers N``: do the tiers hold side by side;
  :mod:`.calibration_session` -- ``calibrate``'s session, the reference's copy in a learner's sandbox.

Which process runs it: the process that started ``grade`` or ``serve`` -- the gradebook's one
writer: :mod:`.engine`, :mod:`.cohort`, :mod:`.resume`, :mod:`.settle`, :mod:`.pool`,
:mod:`.limits` (``report``'s process runs :mod:`.cohort_report`); a grading slot's process --
:mod:`.slot_worker` (a Ray task, then ``python -m`` of it pinned to the slot's cores) and
:mod:`.slots`; ``calibrate``'s process -- :mod:`.fair_timing` and :mod:`.calibration_session`.
"""
