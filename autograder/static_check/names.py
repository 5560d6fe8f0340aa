"""What a notebook binds (imports and aliases) and what a dotted name refers to: the
module behind an alias, and whether the policy refuses it."""

from __future__ import annotations

import ast
import functools
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType, SimpleNamespace
from typing import Iterable, Mapping

from .policy import ALL, ALLOWED_IMPORTS, DENIED, _MODULE_DUNDERS, _MODULE_FACTORIES, _REASONS


@dataclass(frozen=True)
class _Scope:
    """What the notebook's cells bind: imported modules and objects by dotted name
    (``{"np": "numpy", "bench": "course.bench"}``), which of those names are modules, and
    names assigned any other way (so a variable called ``queue`` is not taken for the module)."""

    bindings: Mapping[str, str]
    modules: frozenset[str]
    assigned: frozenset[str]


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
