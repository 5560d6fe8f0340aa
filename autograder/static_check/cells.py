"""Which cells of a notebook run as learner code, and their text as IPython runs it
(magics, automagic and shell escapes turned into code), parsed."""

from __future__ import annotations

import ast
import builtins
import difflib
import functools
import keyword
import warnings
from typing import Iterable, Mapping


def _cells_that_run(nb, instructor=None):
    """(grade_id, text, the learner's?) of each cell that runs as code when nbgrader grades ``nb``.

    nbgrader first keeps a repeated grade_id on its last cell only (DeduplicateIds), then
    (OverwriteCells) restores a cell whose grade_id names a locked or grade cell of the
    instructor's notebook, text and type, whatever the submitted metadata says; gives any other
    cell with a known grade_id the instructor's cell type (so a markdown cell labelled with a
    solution cell's grade_id runs as code); and drops an unknown grade_id. Without the
    instructor's notebook the submitted metadata (nbgrader's ``is_locked``) and types decide.
    """
    known = {c.metadata["nbgrader"]["grade_id"]: c for c in (instructor.cells if instructor else [])
             if c.metadata.get("nbgrader", {}).get("grade_id")}
    for cell, meta in zip(nb.cells, _deduplicated(nb.cells)):
        grade_id = meta.get("grade_id")
        if instructor is None:
            if cell.cell_type == "code":
                yield grade_id, cell.source, not _is_restored(meta)
        elif grade_id in known and _is_restored(known[grade_id].metadata["nbgrader"]):
            if known[grade_id].cell_type == "code":
                yield grade_id, known[grade_id].source, False
        elif known.get(grade_id, cell).cell_type == "code":
            yield grade_id, cell.source, True


def _deduplicated(cells) -> list[Mapping]:
    """Each cell's ``nbgrader`` metadata after DeduplicateIds: of the grade, solution or locked
    cells sharing a grade_id, only the last keeps its metadata."""
    seen, out = set(), []
    for cell in reversed(cells):
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade") or meta.get("solution") or meta.get("locked"):
            meta = {} if meta.get("grade_id") in seen else meta
            seen.add(meta.get("grade_id"))
        out.append(meta)
    return out[::-1]


def _is_restored(meta: Mapping) -> bool:
    """Whether nbgrader restores a cell with this ``nbgrader`` metadata (its ``is_locked``)."""
    return not meta.get("solution", False) and bool(meta.get("grade", False) or meta.get("locked", False))


# -- from cell text to an AST ----------------------------------------------------------------

def _python(text: str) -> tuple[str, list[int], bool]:
    """The cell as the kernel runs it (``InteractiveShell.transform_cell``), for each of its
    lines the learner's line it came from, and whether automagic changed a one-line cell."""
    from IPython.core.inputtransformer2 import TransformerManager

    try:
        code = TransformerManager().transform_cell(text)
    except Exception:  # IPython could not read it either: check the text as written
        code = text
    ran = _automagic(code) if len(code.splitlines()) == 1 else code  # one-line cells only
    return ran, _line_map(text, ran), ran != code


def _automagic(line: str) -> str:
    """A one-line cell as IPython's automagic runs it: ``rm -rf ~ + 1`` parses as Python but
    runs ``%rm -rf ~ + 1`` (a shell alias) unless ``rm`` is a variable by then. Which names are
    variables when the cell runs is not known statically, so a magic's name is taken for the
    magic; assigning to it (``ls = 1``) is Python, as in IPython's AssignmentChecker."""
    from IPython.core.splitinput import LineInfo

    info = LineInfo(line.rstrip("\n"))
    if info.ifun not in _magic_names() or info.the_rest[:1] in ("=", ","):
        return line
    return f"{info.pre_whitespace}get_ipython().run_line_magic({info.ifun!r}, {info.the_rest!r})\n"


@functools.lru_cache(maxsize=None)
def _shell_aliases() -> frozenset[str]:
    """IPython's default aliases (``%ls``, ``%rm``, ``%cat``, ...): each runs a shell command."""
    from IPython.core.alias import default_aliases

    return frozenset(alias for alias, _ in default_aliases())


@functools.lru_cache(maxsize=None)
def _magic_names() -> frozenset[str]:
    """Names automagic may run in a kernel: the core line magics, the default shell aliases,
    and those ipykernel and the default extension (storemagic) add. Builtins and keywords
    always shadow a magic, as in IPython's ``is_shadowed``."""
    from IPython.core import magics
    from IPython.core.magic import Magics

    names = set(_shell_aliases())
    for name in dir(magics):  # dir(), not vars(): IPython 9 loads its magics classes lazily
        value = getattr(magics, name, None)
        if isinstance(value, type) and issubclass(value, Magics) and value.magics:
            names.update(value.magics.get("line", {}))
    names.update(["store", "autosave", "clear", "connect_info", "edit", "less", "man", "more",
                  "qtconsole", "subshell", "mamba", "micromamba", "uv", "code_wrap"])
    return frozenset(n for n in names if not keyword.iskeyword(n) and not hasattr(builtins, n))


def _line_map(original: str, transformed: str) -> list[int]:
    """Line i of ``transformed`` (index i - 1) -> its 1-based line in ``original``.

    IPython keeps most lines as they are and rewrites a magic's line in place, but joins
    backslash continuations and drops leading blank lines, so lines are matched, not counted.
    """
    a, b = original.splitlines(), transformed.splitlines()
    out = [1] * max(len(b), 1)
    for _, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        for j in range(j1, j2):
            out[j] = min(i1 + (j - j1), max(i2 - 1, i1), max(len(a) - 1, 0)) + 1
    return out


def _parse(code: str) -> ast.Module:
    """``code`` as an AST; top-level ``await`` is allowed, as in a notebook."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # invalid escapes and the like: the kernel's concern
        return compile(code, "<cell>", "exec", ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT,
                       dont_inherit=True)


_UNPARSABLE = (SyntaxError, ValueError, RecursionError, MemoryError)


def _trees(texts: Iterable[str]) -> list[ast.Module]:
    """The cells that parse, for collecting what they bind."""
    trees = []
    for text in texts:
        try:
            trees.append(_parse(_python(text)[0]))
        except _UNPARSABLE:
            pass  # reported where the cell is checked
    return trees
