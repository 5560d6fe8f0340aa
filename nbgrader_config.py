"""nbgrader settings for the course kit (also used by `python -m autograder`)."""

c = get_config()  # noqa: F821 -- provided by nbgrader when it loads this file

c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "labs"
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "*.png", "*.csv"]

# A graded cell that runs longer than this is interrupted and scores 0; the grader's own
# harness stops learner code sooner (autograder/targets.py), with a clearer message.
c.Execute.timeout = 240
c.Execute.interrupt_on_timeout = True

