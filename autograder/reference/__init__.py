"""The instructor's reference implementations: what the grader measures learners against.

They are plain, documented, and use the same ``course`` runtime the learner has, so a
ratio of learner to reference compares approaches, not libraries.
"""
