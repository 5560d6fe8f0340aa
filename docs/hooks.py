"""MkDocs hook: warn (so ``mkdocs build --strict`` fails) when a generated reference page is
stale, i.e. differs from what ``python -m autograder.docs`` writes from the code now."""

import logging

log = logging.getLogger("mkdocs.hooks.generated_pages")


def on_pre_build(config, **kwargs):
    try:
        from autograder import docs
    except ImportError as exc:  # the kit is not importable where mkdocs runs
        log.warning(f"cannot check the generated pages ({exc}): install the kit, `pip install -e \".[docs]\"`")
        return
    for path in docs.stale():
        log.warning(f"{path} is stale: run `python -m autograder.docs` and commit it")
