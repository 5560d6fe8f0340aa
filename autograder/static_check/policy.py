"""The static check's policy: the allowlist of imports, the refused modules, names,
attributes and magics, and the reason given for each (one table per kind)."""

from __future__ import annotations

import re
from types import MappingProxyType
from typing import Mapping


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
