"""Which code the tracer follows: include/exclude patterns over module names, qualnames and paths.

A pattern is one of
- a dotted module prefix: `deepspeed` selects `deepspeed` and every `deepspeed.*` module;
- a module glob: `megatron.*.layers` (fnmatch over the dotted name);
- either of those with a qualname glob: `deepspeed.runtime.pipe.engine:PipelineEngine.*`;
- a path (it contains `/`): a directory prefix or an fnmatch glob over the absolute file name;
- `__main__`: the program's main script.
Exclusion wins over inclusion. The tracer's own package is always excluded.

The module of a code object is found from its file name: first through `sys.modules` (what was really
imported), then through `sys.path` (a file being imported right now). The answer is cached per file.
"""

from __future__ import annotations

import fnmatch
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from types import CodeType

_OWN_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_GLOB_CHARS = frozenset("*?[")


@dataclass(frozen=True)
class Pattern:
    text: str
    module: str | None = None
    path: str | None = None
    qualname: str | None = None

    @classmethod
    def parse(cls, text: str) -> Pattern:
        text = text.strip()
        if not text:
            raise ValueError("empty selection pattern")
        if "/" in text or text.endswith(".py"):
            return cls(text, path=os.path.abspath(os.path.expanduser(text)))
        module, _, qualname = text.partition(":")
        if not module:
            raise ValueError(f"selection pattern {text!r} has no module before ':'")
        return cls(text, module=module, qualname=qualname or None)

    def matches(self, module: str, qualname: str, filename: str) -> bool:
        if self.path is not None:
            if any(c in _GLOB_CHARS for c in self.path):
                return fnmatch.fnmatchcase(filename, self.path)
            return filename == self.path or filename.startswith(self.path.rstrip(os.sep) + os.sep)
        assert self.module is not None
        if any(c in _GLOB_CHARS for c in self.module):
            if not fnmatch.fnmatchcase(module, self.module):
                return False
        elif not (module == self.module or module.startswith(self.module + ".")):
            return False
        return self.qualname is None or fnmatch.fnmatchcase(qualname, self.qualname)


def parse_patterns(items: Iterable[str]) -> tuple[Pattern, ...]:
    """Accepts lists like ["deepspeed,megatron", "trainer"]; raises ValueError on an empty or bad piece."""
    patterns = []
    for item in items:
        for piece in item.split(","):
            if piece.strip():
                patterns.append(Pattern.parse(piece))
    return tuple(patterns)


class ModuleNames:
    """Maps a code object's file name to its dotted module name."""

    def __init__(self) -> None:
        self._cache: dict[str, str] = {}
        self._by_file: dict[str, str] = {}
        self._modules_seen = -1

    def _index_modules(self) -> None:
        for name, module in list(sys.modules.items()):
            spec_file = getattr(module, "__file__", None)
            if isinstance(spec_file, str):
                path = os.path.abspath(spec_file)
                if path.endswith((".pyc", ".pyo")):
                    path = path[:-1]
                # __main__ keeps its name even when a runpy copy of the script is also imported under another.
                if name == "__main__" or path not in self._by_file:
                    self._by_file[path] = name
        self._modules_seen = len(sys.modules)

    def of(self, filename: str) -> str:
        found = self._cache.get(filename)
        if found is not None:
            return found
        if filename.startswith("<frozen "):
            found = filename[len("<frozen "):-1]
        elif filename.startswith("<"):
            found = ""
        else:
            path = os.path.abspath(filename)
            if len(sys.modules) != self._modules_seen or path not in self._by_file:
                self._index_modules()
            found = self._by_file.get(path) or _module_from_sys_path(path)
        self._cache[filename] = found
        return found


def _module_from_sys_path(path: str) -> str:
    best = ""
    for entry in sys.path:
        root = os.path.abspath(entry or os.curdir).rstrip(os.sep) + os.sep
        if path.startswith(root) and len(root) > len(best):
            best = root
    if not best:
        return ""
    relative = path[len(best):]
    stem, ext = os.path.splitext(relative)
    if ext not in (".py", ".pyw", ".pyc"):
        return ""
    parts = stem.split(os.sep)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


class Selector:
    """Decides, once per code object, whether the tracer follows it."""

    def __init__(self, include: Iterable[str], exclude: Iterable[str] = ()) -> None:
        self.include = parse_patterns(include)
        self.exclude = parse_patterns(exclude)
        if not self.include:
            raise ValueError("nothing to trace: give at least one --include pattern, e.g. deepspeed,trainer")
        self.modules = ModuleNames()

    def module_of(self, code: CodeType) -> str:
        return self.modules.of(code.co_filename)

    def selects(self, code: CodeType) -> bool:
        filename = code.co_filename
        path = os.path.abspath(filename) if not filename.startswith("<") else filename
        if path.startswith(_OWN_DIR):
            return False
        module = self.modules.of(filename)
        qualname = getattr(code, "co_qualname", code.co_name)
        if not any(p.matches(module, qualname, path) for p in self.include):
            return False
        return not any(p.matches(module, qualname, path) for p in self.exclude)


def qualname_of(code: CodeType) -> str:
    """co_qualname exists from Python 3.11; on 3.10 the bare name is the best there is."""
    return getattr(code, "co_qualname", code.co_name)


def function_matcher(spec: str, modules: ModuleNames):
    """For --start-at: "train_step", "Engine.train_batch" or "megatron.training:train_step" -> code -> bool."""
    module, sep, name = spec.rpartition(":") if ":" in spec else ("", "", spec)
    if not name:
        raise ValueError(f"--start-at {spec!r}: expected a function name, e.g. train_step or pkg.mod:Class.method")

    def matches(code: CodeType) -> bool:
        qualname = qualname_of(code)
        if not (qualname == name or code.co_name == name or qualname.endswith("." + name)):
            return False
        return not sep or modules.of(code.co_filename) == module

    return matches
