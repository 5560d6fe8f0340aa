"""A static check of a lab notebook's learner cells, before anything runs.

The grade never depends on trusting the kernel (docs/security/trust-boundary.md), but some
code has no business in a learner cell: code that reaches the grader's internals, patches
modules, runs strings as code or runs shell commands. This module reads a notebook and
reports such code as :class:`Finding` s, each naming its cell and line, without running or
importing anything from the notebook. A finding does not change a score: the instructor's
CSV and report flag the submission for review, and self-check shows the learner the same
findings before they submit.

Learner cells are the cells that run as code and that nbgrader does not restore from the
instructor's notebook: solution cells and cells a learner added (nbgrader restores locked and
grade cells, so their submitted text never runs). Given the instructor's notebook, the check
follows nbgrader's own rules for which cells those are, so edited metadata hides nothing. Each
cell is read as the kernel reads it: IPython's input transformer turns ``%time`` and ``!ls``
into ``get_ipython()`` calls, and a one-line cell goes through automagic, so ``rm -rf ~ + 1``
is the shell command it runs, not a subtraction. Code that allowed magics, string annotations
and ``course.faults.cold_start`` run is checked as code too.

Public API: :func:`check_notebook`, :func:`check_source`, :class:`Finding`,
:data:`ALLOWED_IMPORTS` (the allowlist), :data:`DENIED` and :data:`RULES` (the rule ids).

What a static check cannot see: names built at run time and used through a plain variable
(``getattr(obj, name)`` is allowed on objects that are not modules: lab 04's solution needs
it), modules kept in objects' attributes or handed out by the kit under other names
(``course.kernels.np``), files written with ``open`` (allowed: lab 02 checkpoints to disk) and
then imported, and whatever the kit's own modules let code do. The trust boundary, not this check, decides the grade.
"""

from __future__ import annotations

import ast
import builtins
import difflib
import functools
import importlib.util
import keyword
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType, SimpleNamespace
from typing import Iterable, Mapping

import nbformat

ALL = None  # in ALLOWED_IMPORTS: every public attribute and submodule of the module

ALLOWED_IMPORTS: Mapping[str, frozenset[str] | None] = MappingProxyType({
    # The kit and the libraries the labs are about.
    "course": ALL,
    "autograder": frozenset({"check"}),  # self-check from a learner cell; the rest is the grader's
    "numpy": ALL,
    "cupy": ALL,
    "cupyx": ALL,
    "scipy": ALL,
    "ray": ALL,
    "matplotlib": ALL,
    "tqdm": ALL,
    "IPython.display": ALL,  # Markdown, display: not the rest of IPython, which reaches the shell
    # The standard library a learner may reasonably use for these labs.
    **dict.fromkeys([
        "abc", "bisect", "collections", "contextlib", "copy", "csv", "dataclasses", "datetime",
        "decimal", "enum", "fractions", "functools", "hashlib", "heapq", "io", "itertools", "json",
        "math", "numbers", "operator", "pathlib", "platform", "pprint", "queue", "random", "re",
        "shutil", "statistics", "string", "tempfile", "textwrap", "time", "typing", "uuid",
        "warnings", "os.path",
    ], ALL),
    # Modules with a few harmless parts and dangerous others: only the listed attributes.
    "os": frozenset({
        "path", "getpid", "getppid", "cpu_count", "getcwd", "listdir", "scandir", "makedirs",
        "mkdir", "remove", "unlink", "rmdir", "rename", "replace", "fsync", "stat", "fspath",
        "sep", "linesep", "curdir", "devnull", "name", "PathLike",
    }),
    "sys": frozenset({
        "version", "version_info", "platform", "implementation", "byteorder", "maxsize",
        "float_info", "getsizeof", "getrecursionlimit", "stdout", "stderr", "exc_info",
    }),
    "threading": frozenset({
        "Thread", "Lock", "RLock", "Event", "Condition", "Semaphore", "BoundedSemaphore",
        "Barrier", "Timer", "local", "current_thread", "main_thread", "get_ident",
        "get_native_id", "active_count",
    }),
    "concurrent.futures": frozenset({
        "ThreadPoolExecutor", "Future", "as_completed", "wait", "FIRST_COMPLETED",
        "FIRST_EXCEPTION", "ALL_COMPLETED", "TimeoutError", "CancelledError",
    }),
    "asyncio": frozenset({
        "sleep", "gather", "wait", "wait_for", "create_task", "ensure_future", "as_completed",
        "Queue", "Lock", "Event", "Semaphore", "TimeoutError", "CancelledError",
        "get_event_loop", "get_running_loop",
    }),
    "traceback": frozenset({
        "print_exc", "format_exc", "print_exception", "format_exception", "format_exception_only",
        "print_tb", "format_tb",
    }),
})
"""Modules learner cells may import, and what they may use of each.

A key allows that module and, with :data:`ALL`, its submodules and public attributes (less
:data:`DENIED`); a set allows only those attributes. Derived from what ``solutions/`` and
``labs/`` import, plus what a learner may reasonably reach for (statistics, collections, threads
for a driver, scipy for a fit, ``platform`` for a verdict table). ``os`` is needed (lab 02 uses
``os.getpid``, ``os.path``, ``os.replace``) but ``os.system``, ``os.kill`` and ``os.environ``
are not; ``signal`` is not needed (``course.faults`` kills actors, ``ray.get`` takes a timeout).
"""

DENIED: frozenset[str] = frozenset({
    "numpy.ctypeslib", "numpy.f2py", "numpy.distutils",
    "ray.get_actor", "ray.util.list_named_actors", "ray.util.state", "ray.experimental.state",
    "ray.job_submission", "ray.scripts", "ray.cloudpickle",
    "typing.get_type_hints", "typing.ForwardRef", "matplotlib.animation",
})
"""Parts of allowed modules that learner cells may not use."""

RULES: Mapping[str, str] = MappingProxyType({
    "import-not-allowed": "imports a module, or a name from one, that ALLOWED_IMPORTS does not allow",
    "forbidden-name": "uses a name that reaches the interpreter, the kernel or the grader",
    "module-attribute-assignment": "assigns, deletes or changes in place what an imported module holds",
    "module-as-value": "passes, stores or returns an imported module, where other code could change it",
    "dynamic-code": "runs a string as code (exec, eval, compile, __import__, unpickling)",
    "computed-getattr": "reaches an attribute by a name built at run time",
    "shell": "runs a shell command (!cmd, %%bash, %ls, ...)",
    "magic": "uses an IPython magic other than %matplotlib, %time, %timeit, %%capture and ?",
    "grader-file": "names the grader's files (the gradebook, the autograder's code)",
    "syntax-error": "the cell does not parse, so nothing else in it could be checked",
})
"""Rule ids of findings, and what each flags."""

_ENV = "reads or changes environment variables, where the grader keeps its connection settings"
_STATE_API = "lists every actor, task and process in the cluster, the grader's included"
_REASONS = MappingProxyType({
    "autograder": "the grader's own code: learner cells may call autograder.check() only",
    "IPython": "only IPython.display is allowed: the rest of IPython reaches the kernel's shell",
    "builtins": "replacing a built-in changes every later cell, the grader's included",
    "ctypes": "raw memory access and C calls: can rewrite or crash the kernel",
    "gc": "reaches every live object in the kernel, the grader's included",
    "inspect": "reads the frames and variables of other code",
    "sqlite3": "opens databases such as nbgrader's gradebook",
    "subprocess": "runs other programs",
    "importlib": "imports or reloads modules by a computed name, around this check",
    "signal": "signal handlers can swallow the grader's interrupts and time limits "
              "(course.faults kills actors for the labs; ray.get takes a timeout)",
    "multiprocessing": "starts processes outside Ray and the grader's limits",
    "pickle": "unpickling runs arbitrary code", "marshal": "loads code objects",
    "types": "builds functions and code objects by hand",
    "timeit": "runs code given as a string (use %timeit or course.bench)",
    "socket": "opens network connections",
    "unittest": "unittest.mock patches attributes of modules",
    "code": "runs strings as code", "codeop": "compiles strings as code", "runpy": "runs other files",
    "atexit": "runs code after grading ends",
    "pdb": "a debugger runs arbitrary code and waits for input",
    "yaml": "yaml.load builds arbitrary Python objects (course.k8s.to_yaml writes manifests)",
    "pandas": "not a dependency of the kit, and pandas.eval and DataFrame.query evaluate strings",
    "os": "only os.path and a few file and process-id functions are allowed "
          "(getpid, replace, makedirs, listdir, remove, ...)",
    "os.system": "runs a shell command", "os.popen": "runs a shell command",
    "os.kill": "sends signals to processes (course.faults.sigkill kills actors for the labs)",
    "os.killpg": "sends signals to process groups",
    "os.environ": _ENV, "os.getenv": _ENV, "os.putenv": _ENV,
    "os._exit": "ends the kernel", "os.abort": "ends the kernel", "os.fork": "forks the kernel",
    "os.chdir": "moves the kernel away from the directory the grader runs it in",
    "sys": "only read-only facts (version, getsizeof, maxsize, ...) and stdout/stderr are allowed",
    "sys.modules": "the table of loaded modules: replacing an entry swaps a module for every import",
    "sys.settrace": "runs a function on every line and call, the grader's included",
    "sys.setprofile": "runs a function on every call, the grader's included",
    "sys._getframe": "reads the frames (and variables) of the code that called this one",
    "sys.exit": "ends the cell with SystemExit",
    "sys.path": "changes where imports come from", "sys.meta_path": "changes how imports work",
    "sys.path_hooks": "changes how imports work",
    "threading": "only threads, locks, events and the like are allowed",
    "threading.settrace": "runs a function on every line of every thread",
    "threading.setprofile": "runs a function on every call of every thread",
    "threading.enumerate": "reaches the kit's and the grader's threads",
    "concurrent.futures": "only thread pools are allowed (Ray runs your processes)",
    "asyncio": "only awaiting, tasks, queues and locks are allowed: asyncio also runs programs",
    "traceback": "only printing and formatting exceptions is allowed: the rest walks stack frames",
    "numpy.ctypeslib": "raw memory access through ctypes",
    "numpy.f2py": "compiles and runs native code", "numpy.distutils": "compiles native code",
    "ray.get_actor": "looks up actors by name, the grader's included",
    "ray.util.list_named_actors": "lists named actors, the grader's included",
    "ray.util.state": _STATE_API, "ray.experimental.state": _STATE_API,
    "ray.job_submission": "submits shell commands as cluster jobs",
    "ray.scripts": "Ray's command line, which starts and stops clusters",
    "ray.cloudpickle": "unpickling runs arbitrary code",
    "typing.get_type_hints": "evaluates annotations given as strings",
    "typing.ForwardRef": "evaluates a string as code",
    "matplotlib.animation": "runs external encoders (ffmpeg, ImageMagick)",
})

_DYNAMIC_CODE = frozenset({"exec", "eval", "compile", "__import__"})

_FORBIDDEN_NAMES = MappingProxyType({
    "__builtins__": "the interpreter's built-ins: replacing one changes every later cell",
    "get_ipython": "the kernel's shell: it runs other cells' code, magics and shell commands",
    "globals": "the notebook's namespace by computed key: it bypasses every name this check reads",
    "locals": "a namespace by computed key: it bypasses every name this check reads",
    "breakpoint": "starts a debugger, which runs arbitrary code and waits for input",
    "exit": "ends the kernel", "quit": "ends the kernel",
})

_FRAMES = "reaches stack frames and the variables of other code, the grader's included"
_FORBIDDEN_ATTRIBUTES = MappingProxyType({
    **dict.fromkeys(["__globals__", "__builtins__"], "a function's module namespace and built-ins"),
    "__code__": "a function's compiled code: replacing it changes the function everywhere",
    **dict.fromkeys(["__closure__", "cell_contents"], "the variables a function closed over"),
    **dict.fromkeys(["__subclasses__", "__bases__", "__base__", "__mro__"],
                    "walks the class hierarchy to every class in the interpreter, the grader's included"),
    "__getattribute__": "attribute lookup that bypasses this check's names",
    "__import__": "imports a module by computed name",
    **dict.fromkeys(["__loader__", "__spec__"], "a module's loader, which runs module code"),
    **dict.fromkeys(["__traceback__", "tb_frame", "f_back", "f_globals", "f_locals", "f_builtins",
                     "f_code", "gi_frame", "gi_code", "cr_frame", "cr_code", "ag_frame"], _FRAMES),
    **dict.fromkeys(["__self__", "__func__", "__wrapped__"],
                    "unwraps a bound or decorated function to what the kit wrapped"),
    **dict.fromkeys(["__reduce__", "__reduce_ex__", "__setstate__"],
                    "code that runs wherever the object is unpickled, the grader's Ray actors included"),
    "ctypes": "raw memory access",
    "__ray_call__": "runs any function inside a Ray actor, the grader's emulated GPUs and probes included",
})

_MODULE_DUNDERS = frozenset({"__name__", "__qualname__", "__module__", "__version__", "__doc__",
                             "__file__", "__all__"})
_DICT_WRITERS = frozenset({"update", "setdefault", "pop", "popitem", "clear", "__setitem__",
                           "__delitem__"})
_CONTAINER_MUTATORS = _DICT_WRITERS | {"append", "extend", "insert", "remove", "discard", "add",
                                       "sort", "reverse"}
_GETATTRS = frozenset({"getattr", "hasattr", "setattr", "delattr", "vars"})  # have their own checks
_ARGUMENT_OK = _GETATTRS | {"print", "dir", "help", "repr", "str", "type", "id", "isinstance", "hash",
                            "bool"}
_CODE_RUNNERS = MappingProxyType({"course.faults.cold_start": ("code", 0)})  # runs it in a fresh Python
_MODULE_FACTORIES = MappingProxyType({"course.backend.xp": "numpy"})  # returns a module (cupy on a GPU)
_DUNDER_IN_TEXT = re.compile(r"__(%s)__" % "|".join(
    sorted(a.strip("_") for a in [*_FORBIDDEN_ATTRIBUTES, "__dict__", "__class__"] if a.startswith("__"))))
_FRAME_IN_TEXT = re.compile(r"\b(get_ipython|f_globals|f_locals|f_back|f_builtins|f_code|tb_frame|"
                            r"gi_frame|cr_frame|ag_frame|cell_contents)\b")
_GRADER_FILE = re.compile(r"gradebook|autograder[/\\]", re.IGNORECASE)

_LINE_MAGICS = frozenset({"matplotlib", "time", "timeit", "pinfo", "pinfo2"})
_CELL_MAGICS = frozenset({"time", "timeit", "capture"})
_SHELL_MAGICS = frozenset({"system", "sx", "bash", "sh", "script", "sudo", "perl", "ruby",
                           "python", "python2", "python3", "pypy"})
_INSTALLS = "installs packages into the grading environment"
_MAGIC_REASONS = MappingProxyType({
    "run": "runs another file's code, which this check cannot see",
    "load": "loads code this check cannot see", "loadpy": "loads code this check cannot see",
    "load_ext": "loads an IPython extension, code this check cannot see",
    "pip": _INSTALLS, "conda": _INSTALLS, "mamba": _INSTALLS,
    "env": _ENV, "set_env": _ENV,
    "cd": "moves the kernel away from the directory the grader runs it in",
    "writefile": "writes a file", "config": "changes the kernel's settings",
    "autoreload": "reloads modules from disk", "debug": "starts a debugger",
})
_ALLOWED_MAGICS = "learner cells may use %matplotlib, %time, %timeit, %%capture and ? only"
_SHELL_REACH = "a shell command reaches the grader's files and processes"


@dataclass(frozen=True)
class Finding:
    """One flagged construct: code cell ``cell`` (1-based among the notebook's code cells),
    ``line`` (1-based within the cell as the learner wrote it), a rule id from :data:`RULES`,
    what was found and why, and the cell's nbgrader ``grade_id`` when it has one."""

    cell: int
    line: int
    rule: str
    message: str
    grade_id: str | None = None

    def __str__(self) -> str:
        where = f"cell {self.cell} ({self.grade_id})" if self.grade_id else f"cell {self.cell}"
        return f"{where}, line {self.line}: {self.message}"


@dataclass(frozen=True)
class _Scope:
    """What the notebook's cells bind: imported modules and objects by dotted name
    (``{"np": "numpy", "bench": "course.bench"}``), which of those names are modules, and
    names assigned any other way (so a variable called ``queue`` is not taken for the module)."""

    bindings: Mapping[str, str]
    modules: frozenset[str]
    assigned: frozenset[str]


def check_notebook(path: str | Path, source: str | Path | None = None) -> list[Finding]:
    """Findings in the learner cells of the notebook at ``path``, in cell and line order.

    With ``source`` (the instructor's notebook, ``solutions/<lab>/<lab>.ipynb``) the cells are
    read as nbgrader will run them (see :func:`_cells_that_run`), so editing a cell's metadata
    hides nothing; without it the submitted metadata and cell types are trusted. What every
    cell imports, restored ones included, counts. Cells are numbered among those that run as
    code: the code cells, in any notebook nbgrader does not retype.
    """
    nb = nbformat.read(str(path), as_version=4)
    instructor = nbformat.read(str(source), as_version=4) if source else None
    cells = list(_cells_that_run(nb, instructor))
    scope = _scope(_trees(text for _, text, _ in cells))
    findings = []
    for number, (grade_id, text, learners) in enumerate(cells, start=1):
        if learners:
            findings += _findings(text, number, grade_id, scope)
    return findings


def check_source(source: str, cell: int = 1, grade_id: str | None = None, *,
                 bindings: Mapping[str, str] | None = None) -> list[Finding]:
    """Findings in one learner cell's ``source``, reported as cell ``cell`` (``grade_id``).

    ``bindings`` names what earlier cells imported (``{"np": "numpy"}``), so that
    ``np.ctypeslib`` is recognised; the cell's own imports are added to it.
    """
    return _findings(source, cell, grade_id, _scope(_trees([source]), dict(bindings or {})))


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


def _findings(text: str, cell: int, grade_id: str | None, scope: _Scope) -> list[Finding]:
    """One cell's findings as :class:`Finding` s, sorted, without duplicates."""
    return [Finding(cell, line, rule, message, grade_id)
            for line, rule, message in sorted(set(_check_text(text, scope)))]


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


def _check_text(text: str, scope: _Scope) -> list[tuple[int, str, str]]:
    """(line, rule, message) for ``text``, lines counted in ``text`` as written."""
    code, line_of, automagic = _python(text)
    try:
        tree = _parse(code)
    except _UNPARSABLE as exc:
        line = line_of[min(getattr(exc, "lineno", None) or 1, len(line_of)) - 1]
        why = getattr(exc, "msg", None) or "too deeply nested"
        return [(line, "syntax-error", f"does not parse, so it could not be checked: {why}")]
    magic_line = next((i for i, s in enumerate(text.splitlines(), 1) if s.lstrip().startswith("%%")), 1)
    checker = _Checker(scope, lambda n: line_of[min(n, len(line_of)) - 1], magic_line, automagic)
    try:
        checker.run(tree)
    except RecursionError:  # hostile nesting: never let it stop the grading
        return [*checker.found, (1, "syntax-error", "too deeply nested to check")]
    return checker.found


# -- what the notebook binds -----------------------------------------------------------------

def _scope(trees: list[ast.Module], bindings: dict[str, str] | None = None) -> _Scope:
    """Imports and simple aliases (``t = time``, ``xp = cupy if gpu else np``) of all ``trees``.

    Every cell counts, in any order: a function defined in one cell runs with the names of all.
    """
    bindings = dict(bindings or {})
    modules = {name for name, dotted in bindings.items() if _is_module(dotted)}
    assigned = set()
    nodes = [node for tree in trees for node in ast.walk(tree)]
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                name = alias.asname or alias.name.split(".")[0]
                bindings[name] = alias.name if alias.asname else name
                modules.add(name)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                if alias.name != "*":
                    bindings[alias.asname or alias.name] = dotted = f"{node.module}.{alias.name}"
                    if _is_module(dotted):
                        modules.add(alias.asname or alias.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            assigned.add(node.id)
        elif isinstance(node, ast.arg):
            assigned.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            assigned.add(node.name)
    changed = True
    while changed:  # aliases of aliases
        changed = False
        for target, value in _simple_assignments(nodes):
            dotted = _dotted(value, bindings)
            if dotted and bindings.get(target) != dotted:
                bindings[target], changed = dotted, True
            is_module = _names_module(value, modules) or dotted in _MODULE_FACTORIES.values()
            if is_module and target not in modules:
                modules.add(target)
                changed = True
    return _Scope(MappingProxyType(bindings), frozenset(modules), frozenset(assigned - set(bindings)))


def _simple_assignments(nodes: list[ast.AST]):
    """(name, value) of every ``name = value``, ``name: T = value`` and ``(name := value)``."""
    for node in nodes:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    yield target.id, node.value
        elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and isinstance(node.target, ast.Name) \
                and node.value:
            yield node.target.id, node.value


def _dotted(node: ast.AST, bindings: Mapping[str, str]) -> str | None:
    """The dotted name ``node`` stands for when it is an imported name or an attribute chain
    on one (``bench.measure`` -> ``course.bench.measure``); through ``a if c else b``,
    ``a or b``, ``(x := a)`` and ``backend.xp()`` too."""
    attrs = []
    while isinstance(node, ast.Attribute):  # a loop, not recursion: chains can be long
        attrs.append(node.attr)
        node = node.value
    base = None
    if isinstance(node, ast.Name):
        base = bindings.get(node.id)
    elif isinstance(node, ast.NamedExpr):
        base = _dotted(node.value, bindings)
    elif isinstance(node, ast.IfExp):
        base = _dotted(node.body, bindings) or _dotted(node.orelse, bindings)
    elif isinstance(node, ast.BoolOp):
        base = next(filter(None, (_dotted(v, bindings) for v in node.values)), None)
    elif isinstance(node, ast.Call) and not node.args and not node.keywords:
        base = _MODULE_FACTORIES.get(_dotted(node.func, bindings))
    return ".".join([base, *reversed(attrs)]) if base else None


def _names_module(node: ast.AST, modules: Iterable[str]) -> bool:
    """Whether ``node`` is a module alias, directly or through ``if``/``or``/``:=``."""
    if isinstance(node, ast.Name):
        return node.id in modules
    if isinstance(node, ast.NamedExpr):
        return _names_module(node.value, modules)
    if isinstance(node, ast.IfExp):
        return _names_module(node.body, modules) or _names_module(node.orelse, modules)
    if isinstance(node, ast.BoolOp):
        return any(_names_module(v, modules) for v in node.values)
    return False


@functools.lru_cache(maxsize=None)
def _is_module(dotted: str) -> bool:
    """Whether ``dotted`` is a module or package, looked up on disk without importing it."""
    top, *rest = dotted.split(".")
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return False
    if spec is None and rest:  # not installed here: an allowlisted package's dotted name is
        return True            # its own submodule (scipy.signal), not another module (signal)
    places = [Path(p) for p in (spec.submodule_search_locations or [])] if spec else []
    for i, part in enumerate(rest):
        packages = [p / part for p in places if (p / part).is_dir()]
        if not packages:
            return i == len(rest) - 1 and any(
                (p / f"{part}.py").is_file() or any(p.glob(f"{part}.*.so")) for p in places)
        places = packages
    return spec is not None


# -- the policy on dotted names --------------------------------------------------------------

def _refusal(dotted: str) -> str | None:
    """Why learner code may not import or use ``dotted`` (``os.system``), or None if it may."""
    parts = dotted.split(".")
    keys = [".".join(parts[:k]) for k in range(len(parts), 0, -1)]
    key = next((k for k in keys if k in ALLOWED_IMPORTS), None)
    if key is None:
        return _reason(dotted)
    policy, rest = ALLOWED_IMPORTS[key], parts[len(key.split(".")):]
    if policy is not ALL and rest and rest[0] not in policy:
        return _reason(f"{key}.{rest[0]}")
    for k, part in enumerate(rest):
        prefix = ".".join([key, *rest[:k + 1]])
        if prefix in DENIED:
            return _reason(prefix)
        if part in _module_names() and not _is_module(prefix):
            return _refusal(".".join(rest[k:]))  # a module another imported: shutil.os, faults.subprocess
        if part.startswith("__") and part.endswith("__") and part not in _MODULE_DUNDERS:
            return "a dunder attribute of imported code: its namespace, loader or code"
        if part.startswith("_") and not part.startswith("__"):
            return "a private name of imported code, not its public interface"
    return None


def _reason(dotted: str) -> str:
    """The most specific reason recorded for ``dotted`` or a prefix of it."""
    parts = dotted.split(".")
    for k in range(len(parts), 0, -1):
        if ".".join(parts[:k]) in _REASONS:
            return _REASONS[".".join(parts[:k])]
    return "not on the allowlist of modules for learner cells (docs/static-check/allowlist.md)"


def _refused_outright(dotted: str) -> bool:
    """Whether nothing under ``dotted`` is allowed (``subprocess``; not ``concurrent``, whose
    ``concurrent.futures`` is)."""
    return _refusal(dotted) is not None and not any(k.startswith(f"{dotted}.") for k in ALLOWED_IMPORTS)


@functools.lru_cache(maxsize=None)
def _module_names() -> frozenset[str]:
    """Names that mean a module even when no cell imports them (``sys.modules``), or when
    another module exposes them (``shutil.os``)."""
    return frozenset(k.split(".")[0] for k in [*ALLOWED_IMPORTS, *_REASONS])


# -- the checks --------------------------------------------------------------------------------

class _Checker:
    """Walks one cell's AST and records (line, rule, message) for what it flags.

    ``visit_<Node>`` methods run on every node of their type; magics and string annotations
    are checked first, as the code they run, and their nodes are then exempt.
    """

    def __init__(self, scope: _Scope, line_of, magic_line: int, automagic: bool = False):
        self.scope, self.line_of, self.magic_line, self.automagic = scope, line_of, magic_line, automagic
        self.found: list[tuple[int, str, str]] = []
        self.parent: dict[ast.AST, ast.AST] = {}
        self.exempt: set[ast.AST] = set()
        # Imported names, and module names no cell assigns (an unimported ``sys`` is still sys).
        self.names = {**{m: m for m in _module_names() if m not in scope.assigned}, **scope.bindings}

    def run(self, tree: ast.Module) -> None:
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                self.parent[child] = node
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _magic(node):
                self.magic(node, *_magic(node))
            for annotation in _annotations(node):
                self.string_annotations(annotation)
        for node in ast.walk(tree):  # breadth first: a call is visited before its arguments
            check = getattr(self, f"visit_{type(node).__name__}", None)
            if check and node not in self.exempt:
                check(node)

    def add(self, node: ast.AST, rule: str, message: str) -> None:
        self.found.append((self.line_of(getattr(node, "lineno", 1)), rule, message))

    def nested(self, code: str, line: int, prefix: str = "", scope: _Scope | None = None) -> None:
        """Findings in code that ``node`` runs (a magic's argument, a string annotation),
        whose line 1 is the learner's line ``line``."""
        self.found += [(line + n - 1, rule, prefix + message)
                       for n, rule, message in _check_text(code, scope or self.scope)]

    def resolve(self, node: ast.AST) -> str | None:
        """The dotted name of an imported name or attribute chain on one."""
        return _dotted(node, self.names)

    def is_called(self, node: ast.AST) -> bool:
        parent = self.parent.get(node)
        return isinstance(parent, ast.Call) and parent.func is node

    # imports

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if (why := _refusal(alias.name)) is not None:
                self.add(node, "import-not-allowed", f"imports {alias.name}: {why}")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module
        if node.level or not module:
            self.add(node, "import-not-allowed", "imports relative to a package: only the allowlist's modules")
        elif (why := _refusal(module)) is not None:
            self.add(node, "import-not-allowed", f"imports from {module}: {why}")
        else:
            for alias in node.names:
                if alias.name == "*" and ALLOWED_IMPORTS.get(module, "") is not ALL:
                    self.add(node, "import-not-allowed", f"imports * from {module}, only partly allowed")
                elif alias.name != "*" and (why := _refusal(f"{module}.{alias.name}")) is not None:
                    self.add(node, "import-not-allowed", f"imports {alias.name} from {module}: {why}")

    # names

    def visit_Name(self, node: ast.Name) -> None:
        name, loads = node.id, isinstance(node.ctx, ast.Load)
        if name in _DYNAMIC_CODE:
            self.add(node, "dynamic-code", f"uses {name}: it runs a string as code, unchecked")
        elif name in _FORBIDDEN_NAMES:
            self.add(node, "forbidden-name", f"uses {name}: {_FORBIDDEN_NAMES[name]}")
        elif name in _FORBIDDEN_ATTRIBUTES and name.startswith("__"):
            verb = "uses" if loads else "defines"
            self.add(node, "forbidden-name", f"{verb} {name}: {_FORBIDDEN_ATTRIBUTES[name]}")
        elif name in _GETATTRS and not self.is_called(node):
            self.add(node, "computed-getattr", f"passes {name} around: what it reaches is unchecked")
        elif name == "autograder" and not loads:
            self.add(node, "forbidden-name", "rebinds autograder, the name the grader's cells call")
        elif name in _REASONS and name not in ALLOWED_IMPORTS and name not in self.scope.bindings \
                and name not in self.scope.assigned:  # an unimported ctypes, gc, ...
            self.add(node, "forbidden-name", f"uses {name}: {_REASONS[name]}")
        if name in self.scope.modules and loads and not self.module_use_ok(node):
            self.add(node, "module-as-value",
                     f"uses the module {self.scope.bindings.get(name, name)!r} as a value (passed, stored or "
                     "returned): code elsewhere could change its attributes")

    def module_use_ok(self, node: ast.Name) -> bool:
        """Whether a module alias is only used to reach its attributes, compared, printed, or
        aliased by name (``t = time``), which this check follows."""
        parent = self.parent.get(node)
        while isinstance(parent, (ast.IfExp, ast.BoolOp, ast.NamedExpr)):
            node, parent = parent, self.parent.get(parent)
        if isinstance(parent, (ast.Attribute, ast.Compare, ast.Expr, ast.FormattedValue)):
            return True
        if isinstance(parent, ast.Call):
            return parent.func is node or isinstance(parent.func, ast.Name) and parent.func.id in _ARGUMENT_OK
        if isinstance(parent, ast.Assign):
            return all(isinstance(t, ast.Name) for t in parent.targets)
        return isinstance(parent, ast.AnnAssign) and isinstance(parent.target, ast.Name)

    def visit_Global(self, node: ast.Global) -> None:
        for name in node.names:
            if name in _FORBIDDEN_NAMES or name in _DYNAMIC_CODE:
                why = _FORBIDDEN_NAMES.get(name, "it runs strings as code")
                self.add(node, "forbidden-name", f"declares {name} global: {why}")

    visit_Nonlocal = visit_Global

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        if node.name in _FORBIDDEN_ATTRIBUTES and node.name.startswith("__"):
            self.add(node, "forbidden-name", f"defines {node.name}: {_FORBIDDEN_ATTRIBUTES[node.name]}")

    visit_AsyncFunctionDef = visit_FunctionDef

    # attributes

    def visit_Attribute(self, node: ast.Attribute) -> None:
        attr, ctx = node.attr, node.ctx
        if attr in _FORBIDDEN_ATTRIBUTES:
            self.add(node, "forbidden-name", f"uses .{attr}: {_FORBIDDEN_ATTRIBUTES[attr]}")
        elif attr == "__class__" and not isinstance(ctx, ast.Load):
            self.add(node, "forbidden-name", "assigns __class__: it turns an object into another class")
        elif attr == "__dict__" and self.writes(node) and not self.resolve(node.value):  # modules: below
            self.add(node, "forbidden-name", f"writes {ast.unparse(node)}: what it sets is unchecked")
        elif attr in ("__setattr__", "__delattr__") and not self.is_called(node):
            self.add(node, "computed-getattr", f"passes {attr} around: attributes set through it are unchecked")
        if not isinstance(ctx, ast.Load) and (dotted := self.resolve(node.value)):
            verb = "deletes" if isinstance(ctx, ast.Del) else "assigns to"
            kind, shown = self.kind(node.value, dotted), _shown_store(node, self.parent.get(node))
            self.add(node, "module-attribute-assignment",
                     f"{verb} an attribute of the imported {kind} {dotted!r} ({shown})")
        if not isinstance(self.parent.get(node), ast.Attribute):
            self.check_chain(node)

    def check_chain(self, node: ast.Attribute) -> None:
        """``os.system``, ``sys.modules``, ``autograder.grade``: what an allowed module holds
        that learner cells may not use. Chains on refused modules are reported at the import."""
        dotted, base = self.resolve(node), self.resolve(_root(node))
        if dotted and base and not _refused_outright(base) and (why := _refusal(dotted)) is not None:
            shown = ast.unparse(node)
            shown = shown if shown == dotted else f"{shown} ({dotted})"
            self.add(node, "forbidden-name", f"uses {shown}: {why}")

    def kind(self, node: ast.AST, dotted: str) -> str:
        return "module" if _names_module(node, self.scope.modules) or _is_module(dotted) else "object"

    def writes(self, node: ast.AST) -> bool:
        """Whether ``node`` (a ``__dict__`` or ``vars(...)``) is assigned, deleted, written by
        subscript, or has a writing method called on it."""
        parent = self.parent.get(node)
        if not isinstance(getattr(node, "ctx", ast.Load()), ast.Load):
            return True
        if isinstance(parent, ast.Subscript) and parent.value is node:
            return not isinstance(parent.ctx, ast.Load)
        return isinstance(parent, ast.Attribute) and parent.attr in _DICT_WRITERS and self.is_called(parent)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        dotted = None if isinstance(node.ctx, ast.Load) else self.resolve(node.value)
        if dotted and not dotted.endswith(".rcParams"):  # matplotlib's settings are for changing
            self.add(node, "module-attribute-assignment",
                     f"changes an item of {dotted!r}, held by an imported module ({ast.unparse(node)} = ...)")

    # calls

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.id if isinstance(func, ast.Name) else None
        if name in ("getattr", "hasattr"):
            self.check_getattr(node, name)
        elif name in ("setattr", "delattr"):
            self.check_setattr(node, name, node.args[:2])
        elif isinstance(func, ast.Attribute) and func.attr in ("__setattr__", "__delattr__"):
            if dotted := self.resolve(func.value):
                self.add(node, "module-attribute-assignment",
                         f"calls {ast.unparse(func)}: it changes the imported {dotted!r}")
            else:
                self.check_setattr(node, func.attr.strip("_"), node.args[:2])
        elif name == "vars":
            self.check_vars(node)
        if any(k.arg == "allow_pickle" and not (isinstance(k.value, ast.Constant) and not k.value.value)
               for k in node.keywords):
            self.add(node, "dynamic-code", "loads with allow_pickle: unpickling runs arbitrary code")
        dotted = self.resolve(func)
        if dotted in ("operator.attrgetter", "operator.methodcaller"):
            self.check_attrgetter(node, dotted)
        elif dotted in _CODE_RUNNERS:
            self.check_code_runner(node, dotted)
        elif isinstance(func, ast.Attribute) and func.attr in _CONTAINER_MUTATORS:
            self.check_mutation(node, func)

    def check_getattr(self, node: ast.Call, name: str) -> None:
        """A literal name is checked like ``obj.name``; a computed one is allowed on objects that
        are not modules when it is a plain variable (lab 04: ``getattr(trace, key)``)."""
        obj, attr = [*node.args, None, None][:2]
        text, dotted = _literal(attr), self.resolve(obj) if obj is not None else None
        if attr is None or any(isinstance(a, ast.Starred) for a in node.args):
            self.add(node, "computed-getattr", f"calls {name} with computed arguments")
        elif text is not None and dotted and _refusal(dotted) is None and (why := _refusal(f"{dotted}.{text}")):
            self.add(node, "forbidden-name", f"uses {dotted}.{text} through {name}: {why}")
        elif text in _FORBIDDEN_ATTRIBUTES:
            self.add(node, "forbidden-name", f"uses .{text} through {name}: {_FORBIDDEN_ATTRIBUTES[text]}")
        elif text is None and (dotted or _names_module(obj, self.scope.modules)):
            self.add(node, "computed-getattr", f"{name} on the imported {dotted or ast.unparse(obj)!r} "
                                               "with a computed name: any of its attributes, unchecked")
        elif text is None and not isinstance(attr, ast.Name):
            self.add(node, "computed-getattr", f"{name} with a name built in place ({ast.unparse(attr)})")

    def check_setattr(self, node: ast.Call, name: str, args: list[ast.AST]) -> None:
        """``setattr``/``delattr`` (or ``object.__setattr__``): a literal name on an object that
        is not imported is the learner's business; anything else is flagged."""
        obj, attr = [*args, None, None][:2]
        text = _literal(attr)
        if obj is None or text is None:
            self.add(node, "computed-getattr", f"{name} with a computed attribute name ({ast.unparse(node)})")
        elif dotted := self.resolve(obj):
            self.add(node, "module-attribute-assignment", f"{name} on the imported "
                     f"{self.kind(obj, dotted)} {dotted!r} ({name}({ast.unparse(obj)}, {text!r}, ...))")
        elif text in _FORBIDDEN_ATTRIBUTES or text in ("__class__", "__dict__"):
            why = _FORBIDDEN_ATTRIBUTES.get(text, "it rewrites what an object is")
            self.add(node, "forbidden-name", f"{name} of {text}: {why}")

    def check_vars(self, node: ast.Call) -> None:
        if not node.args:
            self.add(node, "forbidden-name", "calls vars(): a namespace by computed key, unchecked")
        elif dotted := self.resolve(node.args[0]):
            self.add(node, "forbidden-name", f"calls vars({ast.unparse(node.args[0])}): {dotted!r}'s namespace")
        elif self.writes(node):
            self.add(node, "forbidden-name", "writes through vars(...): attributes set this way are unchecked")

    def check_attrgetter(self, node: ast.Call, dotted: str) -> None:
        for arg in node.args:
            text = _literal(arg)
            if text is None:
                self.add(node, "computed-getattr", f"{dotted} with a computed name ({ast.unparse(arg)})")
            elif bad := [a for a in text.split(".") if a in _FORBIDDEN_ATTRIBUTES]:
                self.add(node, "forbidden-name", f"{dotted} of .{bad[0]}: {_FORBIDDEN_ATTRIBUTES[bad[0]]}")

    def check_code_runner(self, node: ast.Call, dotted: str) -> None:
        """A kit function that runs a string as Python (``course.faults.cold_start``): a
        literal is checked as code, line by line; a computed string is flagged."""
        keyword_, position = _CODE_RUNNERS[dotted]
        args = [k.value for k in node.keywords if k.arg == keyword_] or node.args[position:position + 1]
        if args and _literal(args[0]) is None:
            self.add(node, "dynamic-code", f"{dotted} runs a computed string as code, unchecked")
        elif args:
            self.exempt.add(args[0])
            fresh = _Scope(MappingProxyType({}), frozenset(), frozenset())  # a fresh Python binds nothing
            self.nested(args[0].value, self.line_of(args[0].lineno), f"in the code {dotted} runs: ", fresh)

    def check_mutation(self, node: ast.Call, func: ast.Attribute) -> None:
        """``bench.REGISTRY.clear()``: a container an imported module holds, changed in place
        (``plt.rcParams.update`` is allowed; ``os.remove`` is a module's function, not this)."""
        owner = self.resolve(func.value)
        if owner and not owner.endswith(".rcParams") and owner.split(".")[-1] not in _module_names() \
                and not _is_module(owner):
            self.add(node, "module-attribute-assignment",
                     f"changes {owner!r}, held by an imported module, in place ({ast.unparse(func)}(...))")

    # IPython magics, as IPython transformed them, and string annotations

    def magic(self, node: ast.Call, method: str, args: list[str]) -> None:
        """Allowed magics are checked as the code they run; others are flagged."""
        self.exempt.update([node.func.value.func, *node.args])
        line, (name, arg, body) = self.line_of(node.lineno), [*args, "", ""][:3]
        if method in ("system", "getoutput"):
            self.add(node, "shell", f"runs a shell command (!{name}): {_SHELL_REACH}")
        elif method == "run_line_magic" and name not in _LINE_MAGICS:
            self.flag_magic(node, f"%{name}", name)
        elif method == "run_line_magic" and name == "matplotlib":
            if not re.fullmatch(r"\s*[\w-]*\s*", arg):
                self.add(node, "magic", f"%matplotlib with unexpected arguments ({arg!r})")
        elif method == "run_line_magic":  # time, timeit, pinfo: the argument is Python
            self.magic_code(node, line, _timeit_statement(arg) if name == "timeit" else arg, f"%{name}")
        elif name not in _CELL_MAGICS:
            self.flag_magic(node, f"%%{name}", name)
        else:
            if name == "timeit":  # the first line is setup code
                self.magic_code(node, self.magic_line, _timeit_statement(arg), "%%timeit")
            elif name == "capture" and not re.fullmatch(r"[\w\s-]*", arg):
                self.add(node, "magic", f"%%capture with unexpected arguments ({arg!r})")
            self.nested(body, self.magic_line + 1)

    def magic_code(self, node: ast.AST, line: int, code: str | None, what: str) -> None:
        if code is None:
            self.add(node, "magic", f"{what} with arguments IPython cannot read")
        else:
            self.nested(code, line)

    def flag_magic(self, node: ast.AST, shown: str, name: str) -> None:
        if self.automagic:
            shown += " (IPython runs a one-line cell that starts with a magic's name as that magic)"
        if name in _SHELL_MAGICS or name in _shell_aliases():
            self.add(node, "shell", f"runs {shown}: {_SHELL_REACH}")
        elif name.startswith("%"):
            self.add(node, "magic", f"uses {shown}: a cell magic works only on a cell's first line")
        else:
            self.add(node, "magic", f"uses {shown}: {_MAGIC_REASONS.get(name, _ALLOWED_MAGICS)}")

    def string_annotations(self, annotation: ast.AST) -> None:
        """A string in an annotation is code: ``typing.get_type_hints`` (and so
        ``functools.singledispatch``) evaluates it. Checked as code, on its line."""
        for node in ast.walk(annotation):
            if _literal(node) is not None:
                self.exempt.add(node)
                self.nested(node.value, self.line_of(node.lineno), "in a string annotation: ")

    # strings

    def visit_Constant(self, node: ast.Constant) -> None:
        if not isinstance(node.value, str):
            return
        if found := _DUNDER_IN_TEXT.search(node.value) or _FRAME_IN_TEXT.search(node.value):
            self.add(node, "forbidden-name", f"names {found.group(0)} in a string: attribute names in strings "
                                             "reach what this check flags in code")
        if found := _GRADER_FILE.search(node.value):
            self.add(node, "grader-file",
                     f"names a grader's file ({found.group(0)!r} in {_short(node.value)!r})")


def _annotations(node: ast.AST) -> list[ast.AST]:
    """The annotations ``node`` carries: a parameter's, a function's return, a variable's."""
    if isinstance(node, ast.arg):
        return [node.annotation] if node.annotation else []
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return [node.returns] if node.returns else []
    return [node.annotation] if isinstance(node, ast.AnnAssign) else []


def _magic(node: ast.Call) -> tuple[str, list[str]] | None:
    """(method, string arguments) when ``node`` is ``get_ipython().method('...', ...)``, the
    form IPython turns ``%magic`` and ``!cmd`` into; None otherwise."""
    func = node.func
    if (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call)
            and isinstance(func.value.func, ast.Name) and func.value.func.id == "get_ipython"
            and not func.value.args and not func.value.keywords and not node.keywords
            and func.attr in ("run_line_magic", "run_cell_magic", "system", "getoutput")
            and node.args and all(_literal(a) is not None for a in node.args)):
        return func.attr, [_literal(a) for a in node.args]
    return None


def _timeit_statement(arg: str) -> str | None:
    """The Python in ``%timeit``'s arguments, split from its options by IPython's own parser."""
    from IPython.core.error import UsageError
    from IPython.core.magic import Magics

    try:
        _, statement = Magics.parse_options(SimpleNamespace(options_table={}), arg, "n:r:tcp:qo",
                                            posix=False, strict=False, preserve_non_opts=True)
    except (UsageError, ValueError):
        return None
    return statement


def _shown_store(target: ast.AST, statement: ast.AST | None) -> str:
    """How the learner wrote a store to ``target``: ``time.sleep = ...``, ``del time.sleep``,
    ``time.x += ...``."""
    if isinstance(target.ctx, ast.Del):
        return f"del {ast.unparse(target)}"
    if isinstance(statement, ast.AugAssign):
        operator_ = ast.unparse(statement).removeprefix(ast.unparse(target)).split()[0]
        return f"{ast.unparse(target)} {operator_} ..."
    return f"{ast.unparse(target)} = ..."


def _root(node: ast.AST) -> ast.AST:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node


def _literal(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"
