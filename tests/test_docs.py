"""The documentation site: it builds with ``mkdocs build --strict``, its generated reference pages
say what the code says now, and the README stays a short front page that links into it."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from autograder import cli, docs, selfcheck, static_check
from notebooks import ROOT

README = ROOT / "README.md"


def test_generated_pages_are_current():
    assert docs.stale() == [], "run `python -m autograder.docs` and commit docs/"


def test_a_stale_page_is_named(tmp_path):
    for path, text in docs.pages().items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    assert docs.stale(tmp_path) == []
    (tmp_path / "docs/instructors/cli.md").write_text("# old\n")
    assert docs.stale(tmp_path) == ["docs/instructors/cli.md"]
    assert docs.write(tmp_path) == ["docs/instructors/cli.md"]
    assert docs.stale(tmp_path) == []


def test_the_cli_reference_names_every_command_and_option():
    page = docs.cli_page()
    commands = docs._subparsers(cli.parser())
    assert set(commands) == {"check", "grade", "serve", "report", "release", "colab", "calibrate"}
    for name, (sp, _) in commands.items():
        assert f"## `{name}` {{#{name}}}" in page
        for action in sp._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert f"`{option}" in page, option


def test_the_static_check_pages_name_every_rule_and_allowed_module():
    rules, allowlist = docs.rules_page(), docs.allowlist_page()
    assert [rule for rule in static_check.RULES if f"{{#{rule}}}" not in rules] == []
    assert [m for m in static_check.ALLOWED_IMPORTS if f"`{m}`" not in allowlist] == []
    assert [d for d in static_check.DENIED if f"`{d}`" not in allowlist] == []
    assert "`subprocess`" in allowlist and "`signal`" in allowlist  # refused, with the reason


def test_mkdocs_build_strict(tmp_path):
    """The whole site, as CI builds it: broken links, missing anchors, pages not in the nav and a
    stale generated page (docs/hooks.py) are all errors under --strict."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-4000:]
    labs = (tmp_path / "site" / "learners" / "labs" / "index.html").read_text()
    assert all(lab in labs for lab in selfcheck.labs()), "the README's lab table was not included"
    assert 'class="mermaid"' in (tmp_path / "site" / "architecture" / "index.html").read_text()


def test_every_page_is_in_the_nav():
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = sorted(p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md"))
    assert [p for p in pages if p not in nav] == []


def test_readme_is_short_and_links_into_the_docs():
    text = README.read_text()
    assert len(text.splitlines()) <= 120
    for command in ('pip install -e ".[lab]" && jupyter lab labs/',
                    'python -m pip install -e ".[test]" && python -m pytest'):
        assert command in text
    links = re.findall(r"\]\((docs/[^)#]+)(?:#[^)]*)?\)", text)
    assert links, "the README links to no docs page"
    assert [link for link in links if not (ROOT / link).exists()] == []


def test_messages_cite_docs_pages_that_exist():
    """Run-time messages and docstrings cite docs/... paths: each exists (and its anchor, if any)."""
    cited = set()
    for folder in ("autograder", "course"):
        for path in (ROOT / folder).rglob("*.py"):
            cited |= set(re.findall(r"\bdocs/[\w/.-]+\.md(?:#[\w-]+)?", path.read_text()))
    assert cited, "no message cites a docs page"
    for ref in sorted(cited):
        page, _, anchor = ref.partition("#")
        assert (ROOT / page).exists(), ref
        if anchor:
            assert f"{{#{anchor}}}" in (ROOT / page).read_text(), ref
