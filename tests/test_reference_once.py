"""The reference solution, written once: each lab's solution notebook and its reference module
(``autograder/labs/labNN/reference/``) hold the same code for everything both define.

The grader measures learners against the reference module (and ``calibrate`` measures the
reference against itself); self-paced learners read the solution notebook. Two copies that
drift apart would grade against one solution while showing another, so this test parses both
with :mod:`ast` and holds them identical:

* every name the lab's checks call (its spec's ``learner_names``) is defined in the notebook's
  solution cells and in the reference module -- or is listed in :data:`NOTEBOOK_ONLY`, saying why;
* every name defined at the top level of both (the learner's functions and classes, and the
  given code around them: lab 04's ``Worker``) has the same definition on both sides: the same
  top-level statements binding it (``def``/``class`` and assignments, e.g. lab 02's
  ``PipelineWorker = ray.remote(...)(PipelineWorker)``), compared as ``ast.dump`` after
  normalisation;
* a module-level name those definitions use is imported from the same place on both sides
  (``np`` is NumPy in both, ``placement_group`` is ``ray.util``'s in both), or defined on both
  (and so compared too);
* a name defined only in the reference module, or only in the notebook's solution cells, is a
  failure unless :data:`REFERENCE_ONLY` / :data:`NOTEBOOK_ONLY` list it, with a reason; a
  listed name both sides define, or neither, is a stale entry and fails too.

Normalisation drops comments (``ast`` never sees them) and **docstrings** -- which therefore do
not count. On purpose: a notebook's docstring sits outside its solution region, so it is the
exercise's statement, released to learners in ``labs/``; the reference's docstring may say how
the solution works, which the released notebook must not. Everything else counts: signatures,
defaults, annotations, decorators, names of helpers, the body statement by statement.
"""

from __future__ import annotations

import ast
import copy
import difflib
import symtable

import nbformat
import pytest
from IPython.core.inputtransformer2 import TransformerManager

from autograder import selfcheck
from autograder.labs import learner_names
from notebooks import ROOT, solution

LABS = selfcheck.labs()

# Names the reference module defines and the solution notebook does not, and why. `degraded`
# (and what only it uses) is the reference made worse on purpose, for `python -m autograder
# calibrate`; it has no place in a lesson.
REFERENCE_ONLY: dict[str, dict[str, str]] = {
    "00_measure": {
        "repeat_for": "the grader's own sweep times every candidate batch size with it (checks/lab00.py)",
        "degraded": "calibrate's degraded copy",
    },
    "01_actor_scaling": {
        "_HalfSpeedWorker": "the degraded copy's actor",
        "degraded": "calibrate's degraded copy",
    },
    "02_restart_recovery": {},
    "03_quotas": {
        "degraded": "calibrate's degraded copy",
    },
    "04_data_affinity": {
        "_HalfSpeedJob": "the degraded copy's job",
        "degraded": "calibrate's degraded copy",
    },
    "05_capstone": {
        "_generate_again": "a stage of the degraded copy's pipeline",
        "_preprocess_twice": "a stage of the degraded copy's pipeline",
        "_ModelTwice": "a stage of the degraded copy's pipeline",
        "degraded": "calibrate's degraded copy",
    },
}

# Names the solution notebook's solution cells define and the reference module does not, and why.
NOTEBOOK_ONLY: dict[str, dict[str, str]] = {
    "00_measure": {
        # the ray-task check compares the learner's values with kernels.reference_checksum: no
        # reference run needs a task, and the grader imports the reference module, where
        # process_remote's decorator would ask backend.on_gpu() at import
        "submit_batch": "checked against kernels.reference_checksum; never run on the reference side",
        "process_remote": "submit_batch's task",
    },
}


# ---------------------------------------------------------------- parsing both sides

def _statements(tree: ast.Module) -> dict[str, list[ast.stmt]]:
    """Top-level statements that define a name (def, class, assignment), by that name, in order."""
    out: dict[str, list[ast.stmt]] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [node.name]
        elif isinstance(node, ast.Assign):
            names = [n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names = [node.target.id]
        else:
            continue
        for name in names:
            out.setdefault(name, []).append(node)
    return out


def _imports(tree: ast.Module, package: str = "") -> dict[str, str]:
    """Name -> what a top-level import binds it to (``np`` -> ``numpy``, ``backend`` -> ``course.backend``)."""
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                out[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            base = node.module or ""
            if node.level:  # relative: only the reference packages use these
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([base] if base else [])])
            for alias in node.names:
                out[alias.asname or alias.name] = f"{base}.{alias.name}"
    return out


class Side:
    """One side's top-level definitions and imports, and where each definition was found."""

    def __init__(self, label: str):
        self.label = label
        self.defs: dict[str, list[ast.stmt]] = {}
        self.places: dict[str, list[str]] = {}  # name -> the cells (or the module) defining it
        self.imports: dict[str, str] = {}

    def add(self, tree: ast.Module, where: str, package: str = "") -> None:
        for name, stmts in _statements(tree).items():
            self.defs.setdefault(name, []).extend(stmts)
            self.places.setdefault(name, []).append(where)
        self.imports.update(_imports(tree, package))

    def where(self, name: str) -> str:
        return " and ".join(self.places[name])


def reference_side(lab: str) -> Side:
    path = ROOT / "autograder" / "labs" / f"lab{lab[:2]}" / "reference" / "__init__.py"
    side = Side(str(path.relative_to(ROOT)))
    side.add(ast.parse(path.read_text(), str(path)), side.label, package=f"autograder.labs.lab{lab[:2]}.reference")
    return side


def notebook_sides(lab: str) -> tuple[Side, set[str]]:
    """The notebook's code cells as one side, and the names its solution cells define."""
    path = solution(lab)
    side, solved = Side(str(path.relative_to(ROOT))), set()
    to_python = TransformerManager().transform_cell  # a cell's %magics and !commands, as Python
    for i, cell in enumerate(nbformat.read(path, as_version=4).cells):
        if cell.cell_type != "code":
            continue
        meta = cell.metadata.get("nbgrader", {})
        where = f"{side.label} cell {i} ({meta.get('grade_id') or cell.get('id')})"
        tree = ast.parse(to_python(cell.source), where)
        side.add(tree, where)
        if meta.get("solution"):
            solved |= set(_statements(tree))
    return side, solved


def normalised(stmt: ast.stmt) -> ast.stmt:
    """``stmt`` without docstrings (ast has no comments): what the comparison sees."""
    stmt = copy.deepcopy(stmt)
    for node in ast.walk(stmt):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return stmt


def same(a: list[ast.stmt], b: list[ast.stmt]) -> bool:
    return [ast.dump(normalised(s)) for s in a] == [ast.dump(normalised(s)) for s in b]


def diff(name: str, nb: Side, ref: Side) -> str:
    """A readable unified diff of the normalised definitions of ``name``."""
    def text(side):
        return "\n\n".join(ast.unparse(normalised(s)) for s in side.defs[name]).splitlines()

    return "\n".join(difflib.unified_diff(text(nb), text(ref), nb.where(name), ref.where(name), lineterm=""))


def global_names(stmts: list[ast.stmt]) -> set[str]:
    """The module-level names ``stmts`` use (their locals and closures left out)."""
    top = symtable.symtable(ast.unparse(ast.Module(body=stmts, type_ignores=[])), "<definition>", "exec")
    names, tables = {s.get_name() for s in top.get_symbols() if s.is_referenced()}, list(top.get_children())
    while tables:
        table = tables.pop()
        names |= {s.get_name() for s in table.get_symbols() if s.is_referenced() and s.is_global()}
        tables += table.get_children()
    return names


@pytest.fixture(scope="module", params=LABS)
def lab(request):
    nb, solved = notebook_sides(request.param)
    return request.param, nb, solved, reference_side(request.param)


# ---------------------------------------------------------------- the tests

def test_every_lab_has_its_lists():
    assert set(REFERENCE_ONLY) == set(LABS) and set(NOTEBOOK_ONLY) <= set(LABS)


def test_learner_names_are_in_both(lab):
    name, nb, solved, ref = lab
    only_nb = NOTEBOOK_ONLY.get(name, {})
    missing = [f"{n}: not in the solution cells of {nb.label}" for n in learner_names(name) if n not in solved]
    missing += [f"{n}: not in {ref.label}" for n in learner_names(name) if n not in ref.defs and n not in only_nb]
    assert not missing, "\n".join(missing)


def test_one_definition_per_name(lab):
    name, nb, _, ref = lab
    several = [f"{n}: {nb.where(n)}" for n in sorted(set(nb.defs) & set(ref.defs)) if len(nb.places[n]) > 1]
    assert not several, "the notebook defines a name the reference has in more than one cell: " + "; ".join(several)


def test_shared_definitions_are_identical(lab):
    name, nb, _, ref = lab
    differ = [diff(n, nb, ref) for n in sorted(set(nb.defs) & set(ref.defs)) if not same(nb.defs[n], ref.defs[n])]
    assert not differ, (
        f"{name}: the solution notebook and the reference differ (docstrings and comments aside); "
        "make them one code:\n\n" + "\n\n".join(differ))


def test_shared_definitions_use_the_same_names(lab):
    """A module-level name a shared definition uses is imported from the same place on both sides,
    or defined on both (and so compared above): ``np`` is NumPy on both, ``Worker`` is one class."""
    name, nb, _, ref = lab
    wrong = []
    for n in sorted(set(nb.defs) & set(ref.defs)):
        for used in sorted(global_names(nb.defs[n]) - {n}):
            where = [side.imports.get(used) or ("defined" if used in side.defs else None) for side in (nb, ref)]
            if where[0] != where[1]:
                wrong.append(f"{n} uses {used}: {where[0] or 'not there'} in the notebook, "
                             f"{where[1] or 'not there'} in {ref.label}")
    assert not wrong, "\n".join(wrong)


def test_one_sided_names_are_listed(lab):
    name, nb, solved, ref = lab
    ref_only, nb_only = REFERENCE_ONLY[name], NOTEBOOK_ONLY.get(name, {})
    problems = [f"{n}: only in {ref.label}; define it in the notebook too, or list it in REFERENCE_ONLY"
                for n in sorted(set(ref.defs) - set(nb.defs) - set(ref_only))]
    problems += [f"{n}: only in the solution cells of {nb.label}; define it in {ref.label} too, or list it "
                 "in NOTEBOOK_ONLY" for n in sorted(solved - set(ref.defs) - set(nb_only))]
    problems += [f"{n}: listed in REFERENCE_ONLY, but {'the notebook defines it too' if n in nb.defs else 'not in the reference'}"
                 for n in sorted(ref_only) if n in nb.defs or n not in ref.defs]
    problems += [f"{n}: listed in NOTEBOOK_ONLY, but {'the reference defines it too' if n in ref.defs else 'not in the solution cells'}"
                 for n in sorted(nb_only) if n in ref.defs or n not in solved]
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------- the comparison itself

def _side(src: str) -> Side:
    side = Side("source")
    side.add(ast.parse(src), "source")
    return side


def test_docstrings_and_comments_do_not_count_and_the_code_does():
    a = _side('def f(x, n=2):\n    """The exercise."""\n    return x * n  # twice\n')
    b = _side('def f(x, n=2):\n    """How it works: multiply."""\n    return x * n\n')
    assert same(a.defs["f"], b.defs["f"])
    for other in ('def f(x, n=3):\n    return x * n\n', 'def f(x, n=2) -> int:\n    return x * n\n',
                  'def f(x, n=2):\n    return n * x\n', '@cache\ndef f(x, n=2):\n    return x * n\n'):
        assert not same(a.defs["f"], _side(other).defs["f"]), other
    assert "-    return x * n" in diff("f", a, _side('def f(x, n=2):\n    return n * x\n'))


def test_a_name_is_all_its_binding_statements():
    a = _side("class W:\n    pass\n\nW = ray.remote(max_restarts=-1)(W)\n")
    b = _side("@ray.remote(max_restarts=-1)\nclass W:\n    pass\n")
    assert len(a.defs["W"]) == 2 and not same(a.defs["W"], b.defs["W"])
    assert _imports(ast.parse("import numpy as np\nimport ray.data\nfrom . import at_half_speed"), "pkg") == {
        "np": "numpy", "ray": "ray", "at_half_speed": "pkg.at_half_speed"}


def test_the_names_a_definition_uses_are_its_globals_only():
    src = ("def best(run, candidates, images=IMAGES):\n    rates = {}\n    for n in candidates:\n"
           "        def many(n=n):\n            run(n)\n        rates[n] = throughput(many, n)\n"
           "    return max(rates, key=rates.get)\n")
    assert global_names(_side(src).defs["best"]) == {"IMAGES", "throughput", "max"}
