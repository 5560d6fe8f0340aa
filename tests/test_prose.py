"""Every number in a lab's prose is measured in the notebook or cited (issue 13).

Fast: reads the markdown cells of every ``solutions/*/*.ipynb`` as text; no kernel, no Ray.

The rule, one **sentence** at a time (a table row, a list item and a blockquote are split into
sentences too):

* A *claim number* is a number with a unit: s, ms, µs, seconds, minutes, hours; %; × or x as
  a multiplier (not 64×64); KB/MB/GB, KiB/MiB/GiB; GPUs, nodes, pods; images/s, calls/s.
  Text in backticks, fenced code and ``$$`` math is code, not prose, and is not searched.
* It is **sourced** when its sentence carries a citation marker: an italic page title
  (*Pod Lifecycle*: an italic span that starts with a capital letter), a web address
  (kubernetes.io, https://...), a file name in backticks (`release/benchmarks/README.md`,
  `ray_config_def.h`: a path with "/" or a name with a file extension), or the word "docs",
  "documentation" or "docstring".
* It is **quoted** when it stands inside double quotes or in a ``>`` blockquote: the claims
  this course tests are quoted to be measured, not asserted.
* Anything else must be in ``EXEMPT`` below, with the reason it needs no source (the notebook
  prints it, it is a grading target in its lab's ``targets.py``, it is the lab's own set-up or
  a definition). A grading target's value is checked against that file, and an
  exemption no sentence uses any more fails too, so the list stays true.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "solutions").glob("*/*.ipynb"))

NUM = r"\d+(?:[.,]\d+)*"
UNIT = (r"(?:ms|µs|s|sec|seconds?|min|minutes?|hours?|%|×(?!\s*\d)|x(?![\w\d])|"
        r"[KMG]i?B|GPUs?|nodes?|pods?|(?:images|calls|items|kernels)/s)")
# A number (a range "15–50" counts as one), an optional "k" (thousands), then a unit, joined by
# a space, a thin or no-break space, or a hyphen ("200-GPU").
CLAIM = re.compile(rf"(?<![\w.]){NUM}(?:\s?[–-]\s?{NUM})?k?[\s\u2009\u00a0-]?{UNIT}(?![\w])")
CITATION = re.compile(
    r"(?<!\*)\*(?!\*)\"?[A-Z][^*\n]+(?<!\*)\*(?!\*)"                # an italic page title (not bold)
    r"|https?://"                                                   # a URL
    r"|\b[a-z0-9-]+(?:\.[a-z0-9-]+)*\.(?:io|com|org|dev|net)\b"      # a web address
    r"|`[\w.-]+(?:/[\w.-]+)+`|`[\w/.-]+\.(?:py|md|json|h|cc|yaml|yml|rst|txt|ipynb)`"  # a file
    r"|\b(?i:docs|documentation|docstring)\b")
QUOTE = re.compile(r'"[^"\n]*"|“[^”]*”')
CODE_SPAN = re.compile(r"`[^`]*`")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z*(\"“`])")

TARGET = "grading target, autograder/labs/<lab>/targets.py "


def target(name: str) -> str:
    """The reason for a number that states a grading target; the test checks it against the file."""
    return TARGET + name


# (lab, the number as written, text of its sentence, why it needs no citation)
EXEMPT = [
    ("03_quotas", "4×", "keeps 4× its quota in flight", target("flood_factor")),
    ("04_data_affinity", "4 MiB", "1,024 seeded 64×64 images",
     "a definition: 1,024 images × 64 × 64 one-byte pixels = 4 MiB (course/locality.py SHARD_IMAGES)"),
]


def sentences(markdown: str):
    """(text, quoted) for every sentence of one markdown cell, with what stood inside double
    quotes replaced by "…"; quoted: the sentence is in a blockquote."""
    text = re.sub(r"```.*?```", " ", markdown, flags=re.S)
    text = re.sub(r"\$\$.*?\$\$", " ", text, flags=re.S)
    items, current, quote = [], [], False
    for line in text.splitlines() + [""]:
        stripped = line.strip()
        new_item = (not stripped or stripped.startswith(("|", "* ", "- ", "#"))
                    or re.match(r"\d+\. ", stripped) or stripped.startswith(">") != quote)
        if new_item and current:
            items.append((" ".join(current), quote))
            current = []
        quote = stripped.startswith(">")
        if stripped:
            current.append(stripped.lstrip(">").strip())
    for item, quoted in items:
        item = QUOTE.sub('"…"', item)  # a quote may span sentences: out before splitting
        for s in SENTENCE_END.split(item):
            if s.strip():
                yield s.strip(), quoted


def claims(sentence: str) -> list[str]:
    """The claim numbers of one sentence that are not inside code spans or quotes."""
    prose = CODE_SPAN.sub(" ", sentence)
    prose = QUOTE.sub(" ", prose)
    prose = prose.replace("**", "")
    return [m.group(0) for m in CLAIM.finditer(prose)]


def unsourced(markdown: str) -> list[tuple[str, str]]:
    """(number, sentence) for every claim number of one markdown cell with no citation marker."""
    out = []
    for s, quoted in sentences(markdown):
        if quoted or CITATION.search(s):
            continue
        out += [(n, s) for n in claims(s)]
    return out


def exempt(lab: str, number: str, sentence: str):
    """The exemption that covers this number in this sentence, or None."""
    for e in EXEMPT:
        if e[0] == lab and e[1] == number and e[2] in sentence:
            return e
    return None


def hits(notebooks=NOTEBOOKS):
    """(lab, cell index, number, sentence, exemption) for every unsourced claim number."""
    for path in notebooks:
        lab = path.parent.name
        for i, cell in enumerate(json.loads(path.read_text())["cells"]):
            if cell["cell_type"] != "markdown":
                continue
            for number, s in unsourced("".join(cell["source"])):
                yield lab, i, number, s, exempt(lab, number, s)


# --- the detector itself ------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "The quiet tenants kept about 0.9x of their solo throughput.",
    "Placement groups measured 0.62–0.69× here.",
    "A restart takes 15–50 s after a node failure.",
    "Kubernetes tops out at ~300 GPUs.",
    "Each shard is 4 MiB.",
    "Overhead is about 15 % on this machine.",
    "Starting the cluster takes 15 s on a laptop. Ray's *Scheduling* page says something else.",
])
def test_detector_flags_an_unsourced_number(text):
    assert unsourced(text), text


@pytest.mark.parametrize("text", [
    "Ray's guide *Optimizing performance* says tasks shorter than about 10 ms rarely speed up.",
    "The cap is 5 minutes (kubernetes.io, Pod Lifecycle).",
    "Defaults in `src/ray/common/ray_config_def.h` make it 15–50 s.",
    "The Ray docs say 1 ms per call.",
    'The claim: "Ray resurrects a dead actor in ~30 ms".',
    "> *Kubernetes tops out at ~300 GPUs.*",
    "A batch of 64×64 images, a 3×3 filter.",
    "Call `time.sleep(0.05)` with `num_gpus=1`.",
    "Lab 02 has 15 points and 3 exercises.",
])
def test_detector_passes_sourced_quoted_or_unitless_text(text):
    assert not unsourced(text), text


def test_detector_reads_sentences_not_cells():
    cell = ("Ray's *Scheduling* page covers locality.\n"
            "The naive job moved 30 % more bytes.")
    assert [n for n, _ in unsourced(cell)] == ["30 %"]


def test_a_number_planted_in_a_lab_is_caught(tmp_path):
    lab = NOTEBOOKS[0]
    nb = json.loads(lab.read_text())
    nb["cells"].append({"cell_type": "markdown", "metadata": {},
                        "source": ["On this machine the quiet tenants kept about 0.9x of their solo\n",
                                   "throughput, and each must come within ±15 % of the truth.\n"]})
    planted = tmp_path / lab.parent.name / lab.name
    planted.parent.mkdir()
    planted.write_text(json.dumps(nb))
    caught = [(i, number) for _, i, number, _, e in hits([planted]) if e is None]
    assert caught == [(len(nb["cells"]) - 1, "0.9x"), (len(nb["cells"]) - 1, "15 %")]


# --- the labs -----------------------------------------------------------------------------

def test_every_number_in_the_prose_is_measured_or_cited():
    bad = [f"{lab} cell {i}: {number!r} in: {s}" for lab, i, number, s, e in hits() if e is None]
    assert not bad, ("numbers with a unit and neither a citation in their sentence nor an entry in "
                     "EXEMPT (tests/test_prose.py):\n" + "\n".join(bad))


def test_every_exemption_is_used():
    used = {id(e) for *_, e in hits() if e is not None}
    stale = [e[:3] for e in EXEMPT if id(e) not in used]
    assert not stale, f"exemptions no sentence needs any more (remove them): {stale}"


def test_every_exemption_has_a_reason():
    assert all(len(e) == 4 and e[3].strip() for e in EXEMPT)


def value(number: str) -> float:
    """A claim number in the units the targets use: seconds, fractions, ratios."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s?(ms|s|%|×)", number)
    assert m, f"cannot read {number!r} as a target"
    return float(m.group(1)) * {"ms": 1e-3, "s": 1.0, "%": 1e-2, "×": 1.0}[m.group(2)]


def test_target_exemptions_say_what_targets_py_says():
    from autograder import targets

    for lab, number, _, reason in EXEMPT:
        if not reason.startswith(TARGET):
            continue
        field = reason[len(TARGET):]
        got = getattr(targets.for_lab(lab), field)
        allowed = got if isinstance(got, tuple) else (got,)
        assert any(abs(value(number) - a) < 1e-9 for a in allowed), (
            f"{lab}: the prose says {number}, its targets.py {field} is {got}")


def test_the_shard_size_definition_holds():
    # read from the source, so that this test imports no Ray
    images = re.search(r"^SHARD_IMAGES = (\d+)", (ROOT / "course" / "locality.py").read_text(), re.M)
    assert int(images.group(1)) * 64 * 64 == 4 * 2**20


# --- lesson length and closing (issue 28) -------------------------------------------------
# Every lab, the capstone (05) included: its cell length and its closing (takeaways, self-quiz)
# joined labs 00-04 once its long cells were split and it gained the closing they have.

LESSON_LABS = [p for p in NOTEBOOKS if p.parent.name[:2] in {"00", "01", "02", "03", "04"}]
CAPSTONE = ROOT / "solutions" / "05_capstone" / "05_capstone.ipynb"
CELL_WORDS = 200      # no markdown cell longer than this (collapsed "Going deeper" cells included)
LESSON_WORDS = 1300   # a lab's markdown, not counting what sits collapsed in <details>
COLLAPSED = re.compile(r"<details>.*?</details>", re.S)


def words(text: str) -> int:
    return len(re.findall(r"\S+", text))


def markdown_cells(path):
    return [(i, "".join(c["source"])) for i, c in enumerate(json.loads(path.read_text())["cells"])
            if c["cell_type"] == "markdown"]


def long_cells(path, limit=CELL_WORDS):
    return [(i, words(s)) for i, s in markdown_cells(path) if words(s) > limit]


def lesson_words(path) -> int:
    return sum(words(COLLAPSED.sub(" ", s)) for _, s in markdown_cells(path))


def closing_problems(path) -> list[str]:
    """What the end of a lab lacks: the computed takeaways (a code cell calling
    course.takeaways for this lab, after the verdict table), a self-quiz of three questions with
    hidden answers, and "Before you submit" last."""
    lab = path.parent.name
    cells = json.loads(path.read_text())["cells"]
    src = ["".join(c["source"]) for c in cells]
    take = [i for i, (c, s) in enumerate(zip(cells, src))
            if c["cell_type"] == "code" and f'course.takeaways.markdown("{lab}"' in s]
    verdict = [i for i, s in enumerate(src) if "verdicts.for_lab(" in s]
    quiz = [i for i, (c, s) in enumerate(zip(cells, src))
            if c["cell_type"] == "markdown" and "Self-quiz" in s and s.count("<details>") >= 3]
    problems = []
    if not take:
        problems.append("no code cell renders course.takeaways.markdown(lab, ...)")
    elif verdict and take[-1] < verdict[-1]:
        problems.append("the takeaways come before the verdict table")
    if not quiz or (take and quiz[-1] < take[-1]):
        problems.append("no self-quiz (three <details> answers) after the takeaways")
    if "Before you submit" not in src[-1]:
        problems.append('the last cell is not "Before you submit"')
    return problems


def test_a_long_cell_and_a_missing_closing_are_caught(tmp_path):
    lab = LESSON_LABS[0]
    nb = json.loads(lab.read_text())
    nb["cells"].insert(3, {"cell_type": "markdown", "metadata": {}, "source": ["word " * (CELL_WORDS + 1)]})
    nb["cells"] = [c for c in nb["cells"] if "course.takeaways" not in "".join(c["source"])]
    planted = tmp_path / lab.parent.name / lab.name
    planted.parent.mkdir()
    planted.write_text(json.dumps(nb))
    assert long_cells(planted) == [(3, CELL_WORDS + 1)]
    assert "no code cell renders course.takeaways.markdown(lab, ...)" in closing_problems(planted)


@pytest.mark.parametrize("path", LESSON_LABS + [CAPSTONE], ids=lambda p: p.parent.name)
def test_no_markdown_cell_over_the_limit(path):
    assert not long_cells(path), f"markdown cells over {CELL_WORDS} words (cell, words): {long_cells(path)}"


@pytest.mark.parametrize("path", LESSON_LABS + [CAPSTONE], ids=lambda p: p.parent.name)
def test_lesson_prose_fits_the_budget(path):
    assert lesson_words(path) <= LESSON_WORDS, f"{lesson_words(path)} words of lesson markdown"


@pytest.mark.parametrize("path", LESSON_LABS + [CAPSTONE], ids=lambda p: p.parent.name)
def test_every_lab_closes_with_its_numbers_and_a_quiz(path):
    assert not closing_problems(path), closing_problems(path)


# --- accuracy rules from issue 44 ---------------------------------------------------------
# Each reads the solution notebooks as text (and lab 01's ceiling as code): fast, no kernel.

def prose_sentences(path):
    for i, text in markdown_cells(path):
        for s, _ in sentences(text):
            yield i, s


TOKEN_BY_DEFAULT = re.compile(r"token auth\w*.*\b(on|enabled) by default|\b(on|enabled) by default.*token auth",
                              re.I)


def token_problems(path) -> list[str]:
    """A sentence saying token authentication is on by default must say for what: Ray 2.60 turns it
    on by default for a local ``ray.init()`` only; ``ray start --head`` (multi-node and KubeRay
    clusters) needs a token (Ray's ``scripts/scripts.py``, ``_private/authentication/``)."""
    return [f"cell {i}: {s}" for i, s in prose_sentences(path)
            if TOKEN_BY_DEFAULT.search(s) and "ray.init()" not in s]


def silent_node_problems(path) -> list[str]:
    """A silent node's Ready condition turns Unknown (the unreachable taint); NotReady is a kubelet
    that answers and reports itself not ready (kubernetes.io *Nodes*)."""
    return [f"cell {i}: {s}" for i, s in prose_sentences(path) if re.search(r"\bNotReady\b", s)]


@pytest.mark.parametrize("text, caught", [
    ("Token authentication, on by default in clusters Ray 2.60 starts, checks one secret.", True),
    ("Only a local `ray.init()` turns token authentication on by default; `ray start --head` needs a token.", False),
    ("Kubernetes marks a silent node NotReady after the grace period.", True),
    ("A silent node's `Ready` turns `Unknown` (taint `unreachable`).", False),
])
def test_the_issue_44_detectors(tmp_path, text, caught):
    nb = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": [text]}]}
    path = tmp_path / "00_x" / "00_x.ipynb"
    path.parent.mkdir()
    path.write_text(json.dumps(nb))
    assert bool(token_problems(path) or silent_node_problems(path)) == caught


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.parent.name)
def test_token_auth_by_default_is_scoped_to_a_local_ray(path):
    assert not token_problems(path), token_problems(path)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.parent.name)
def test_a_silent_node_is_unknown_not_notready(path):
    assert not silent_node_problems(path), silent_node_problems(path)


def lab_code(lab: str) -> str:
    path = ROOT / "solutions" / lab / f"{lab}.ipynb"
    return "\n".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code")


def test_lab01_ceiling_is_above_every_rate_the_model_allows():
    """The plotted ceiling is min(N / t_kernel, the driver's fastest trivial rate): no actor ends more
    than one kernel per t_kernel, no driver issues calls faster than it did trivially. The old
    'upper bound' N / (t_kernel + t_overhead) sat below what a pipelined driver reaches."""
    code = lab_code("01_actor_scaling")
    assert "n / (t + overhead_s)" not in code, "the old 'fully overlapped bound' is back"
    tree = ast.parse(code)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "ceiling")
    scope = {"driver_rate": 1000.0}
    exec(compile(ast.Module([fn], []), "ceiling", "exec"), scope)
    for n in (1, 2, 4, 8, 16, 64):
        for t in (0.002, 0.05):
            c = scope["ceiling"](n, t)
            assert c == pytest.approx(min(n / t, 1000.0))
            assert c >= min(n / (t + 1e-3), 1000.0)  # never below the old, too low "upper bound"


def test_c3_and_c8_rules_in_the_labs_say_what_the_verdicts_say():
    lab02 = "".join(s for _, s in markdown_cells(ROOT / "solutions/02_restart_recovery/02_restart_recovery.ipynb"))
    assert "*reframed*" in lab02 and "refuted" not in lab02
    lab00 = "".join(s for _, s in markdown_cells(ROOT / "solutions/00_measure/00_measure.ipynb"))
    assert "*not testable yet*" in lab00


# --- tiers are read from targets.py, not restated (issue 52) ------------------------------
# Lab 04's prose said 0.6× after its tier moved to 0.7: a restated tier goes stale. The labs below
# print theirs from autograder.targets.for_lab in a locked cell; their prose and graded cells' comments
# state no target value of their lab's targets.py.

READ_TIERS = ["00_measure", "01_actor_scaling", "02_restart_recovery", "03_quotas", "04_data_affinity", "05_capstone"]


def restated_targets(path, ignore=()) -> list[str]:
    """Target values of the lab's targets.py written out in its markdown or its graded cells' comments
    (as "0.7×", "≥ 0.7", "±15 %", "1,000 items"), but for the phrases ``ignore``."""
    from dataclasses import fields

    from autograder import targets

    lab = path.parent.name
    t = targets.for_lab(lab)
    values = set()
    for f in fields(t):
        v = getattr(t, f.name)
        values.update(x for x in (v if isinstance(v, tuple) else (v,)) if isinstance(x, (int, float)))
    cells = json.loads(path.read_text())["cells"]
    texts = [(i, "".join(c["source"])) for i, c in enumerate(cells) if c["cell_type"] == "markdown"]
    texts += [(i, "".join(c["source"]).split("\n", 1)[0]) for i, c in enumerate(cells)
              if c["cell_type"] == "code" and "".join(c["source"]).startswith("# Graded (")]
    for phrase in ignore:
        texts = [(i, text.replace(phrase, " ")) for i, text in texts]
    out = []
    for v in values:
        forms = {f"{v:g}×", f"≥ {v:g}", f"≤ {v:g}", f"{v:g} ×"}
        if isinstance(v, float) and v < 1:
            forms.add(f"±{v * 100:g} %")
        if isinstance(v, int) and v >= 1000:
            forms.add(f"{v:,} items")
        out += [f"cell {i}: {form!r}" for i, text in texts for form in forms
                if re.search(rf"(?<![\d.]){re.escape(form)}(?![\d])", CODE_SPAN.sub(" ", text))]
    return out


def test_a_restated_tier_is_caught():
    lab = ROOT / "solutions" / "04_data_affinity" / "04_data_affinity.ipynb"
    nb = json.loads(lab.read_text())
    nb["cells"].append({"cell_type": "markdown", "metadata": {}, "source": ["images/s ≥ 0.6× the reference's"]})
    nb["cells"].append({"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                        "source": ["# Graded (1 point): images/s ≥ 0.7× the reference's\n", "pass"]})
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        planted = Path(tmp) / lab.parent.name / lab.name
        planted.parent.mkdir()
        planted.write_text(json.dumps(nb))
        last = len(nb["cells"]) - 1  # the graded cell's 0.7 is lab 04's tier; 0.6 is no tier of it any more
        assert sorted(restated_targets(planted)) == [f"cell {last}: '0.7×'", f"cell {last}: '≥ 0.7'"]


# Numbers in lab prose that equal a target's value but are not that target (a version, arithmetic,
# the harness's own flood that section 1 describes): what a restatement check must not count.
NOT_TIERS = {"03_quotas": ["Kueue ≥ 0.6", "1 + 3 × 6", "keeps 4× its quota in flight"]}


@pytest.mark.parametrize("lab", READ_TIERS)
def test_tiers_are_printed_from_targets_py_not_restated(lab):
    path = ROOT / "solutions" / lab / f"{lab}.ipynb"
    found = restated_targets(path, ignore=NOT_TIERS.get(lab, ()))
    assert not found, found
    code = lab_code(lab)
    assert f'TARGETS = autograder.begin("{lab}")' in code  # the one way a notebook reads its targets


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.parent.name)
def test_the_points_a_lab_announces_are_its_test_cells_points(path):
    """Lab 04 announced 17 points for 15 of test cells."""
    from autograder.checks.points import graded_cells

    said = [int(m.group(1)) for _, s in markdown_cells(path)
            for m in re.finditer(r"How this lab is graded \((\d+) points\)", s)]
    assert all(n == sum(graded_cells(path).values()) for n in said), (said, graded_cells(path))
