"""The grader's side: code that runs in the grader's own processes, never in a learner's.

New grader-side modules live here (the sandbox first); the rest of the flat package moves in
as the autograder is split by where its code runs (issue 30). Nothing under
:mod:`autograder.grader` may be imported by kernel-side code.
"""
