"""The modules the learner's kernel runs: the agent that answers the grader's requests, the
guard, the one object it keeps between requests, the channel and the kit steps (the channel and
the kit steps are also run by the grader and its reference process).

None of them imports the grader's side (``pyproject.toml``'s import contracts, held by
``tests/test_layers.py``).
"""
