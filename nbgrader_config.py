"""nbgrader settings for the course kit (also used by `python -m autograder`)."""

c = get_config()  # noqa: F821 -- provided by nbgrader when it loads this file

c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "labs"
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "*.png", "*.csv"]

# A graded cell that runs longer than this is interrupted and scores 0; the grader's own
# harness stops learner code sooner (autograder/targets.py), with a clearer message.
c.Execute.timeout = 240
c.Execute.interrupt_on_timeout = True

# Ray's C++ core writes warnings straight to file descriptor 2. By default ipykernel forwards
# fd-level output into the running cell as stderr, and nbgrader then scores that cell 0.
# Keep such output in the kernel's own log instead (Python-level stderr is unaffected).
c.Execute.extra_arguments = ["--HistoryManager.hist_file=:memory:", "--IPKernelApp.capture_fd_output=False"]
