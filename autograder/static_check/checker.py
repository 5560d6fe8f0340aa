"""The AST walk over one cell: every construct the policy refuses, with its line."""

from __future__ import annotations

import ast
import re
from types import MappingProxyType

from .cells import _parse, _python, _shell_aliases, _UNPARSABLE
from .names import (
    _annotations, _dotted, _is_module, _literal, _magic, _module_names, _names_module, _refusal,
    _refused_outright, _root, _Scope, _short, _shown_store, _timeit_statement,
)
from .policy import (
    ALL, ALLOWED_IMPORTS, _ALLOWED_MAGICS, _ARGUMENT_OK, _CELL_MAGICS, _CODE_RUNNERS, _CONTAINER_MUTATORS,
    _DICT_WRITERS, _DUNDER_IN_TEXT, _DYNAMIC_CODE, _FORBIDDEN_ATTRIBUTES, _FORBIDDEN_NAMES, _FRAME_IN_TEXT,
    _GETATTRS, _GRADER_FILE, _LINE_MAGICS, _MAGIC_REASONS, _REASONS, _SHELL_MAGICS, _SHELL_REACH,
)


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
