"""Selection patterns and module naming: what the tracer follows is exactly what the user named."""

from __future__ import annotations

import sys
import types

import pytest

from tracing.selection import ModuleNames, Pattern, Selector, function_matcher, parse_patterns


@pytest.mark.parametrize(("pattern", "module", "qualname", "expected"), [
    ("deepspeed", "deepspeed", "f", True),
    ("deepspeed", "deepspeed.runtime.pipe.engine", "f", True),
    ("deepspeed", "deepspeed_extra", "f", False),  # a prefix is a package, not a string prefix
    ("deepspeed.runtime", "deepspeed.utils", "f", False),
    ("megatron.*.layers", "megatron.core.layers", "f", True),
    ("megatron.*.layers", "megatron.layers", "f", False),
    ("deepspeed.runtime.pipe.engine:PipelineEngine.*", "deepspeed.runtime.pipe.engine", "PipelineEngine.train_batch", True),
    ("deepspeed.runtime.pipe.engine:PipelineEngine.*", "deepspeed.runtime.pipe.engine", "helper", False),
    ("__main__", "__main__", "main", True),
])
def test_module_patterns(pattern, module, qualname, expected):
    assert Pattern.parse(pattern).matches(module, qualname, "/x.py") is expected


def test_path_patterns(tmp_path):
    directory = Pattern.parse(str(tmp_path))
    assert directory.matches("", "f", str(tmp_path / "a" / "b.py"))
    assert not directory.matches("", "f", str(tmp_path) + "_other/b.py")
    glob = Pattern.parse(str(tmp_path / "*" / "model.py"))
    assert glob.matches("", "f", str(tmp_path / "x" / "model.py"))
    assert not glob.matches("", "f", str(tmp_path / "x" / "data.py"))


def test_bad_patterns_are_refused():
    with pytest.raises(ValueError, match="no module before"):
        Pattern.parse(":f")
    with pytest.raises(ValueError, match="nothing to trace"):
        Selector([" , "])
    assert [p.text for p in parse_patterns(["a,b", "c"])] == ["a", "b", "c"]


def code_in(path: str, source: str = "def f():\n    pass\n") -> types.CodeType:
    namespace: dict = {}
    exec(compile(source, path, "exec"), namespace)
    return namespace["f"].__code__


def test_module_names_from_sys_modules_and_sys_path(tmp_path, monkeypatch):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    monkeypatch.syspath_prepend(str(tmp_path))
    names = ModuleNames()
    # Not imported (yet): derived from sys.path.
    assert names.of(str(package / "sub" / "engine.py")) == "pkg.sub.engine"
    assert names.of(str(package / "__init__.py")) == "pkg"
    assert names.of("<frozen importlib._bootstrap>") == "importlib._bootstrap"
    assert names.of("<string>") == ""
    # Imported: sys.modules is the truth, even for a file outside sys.path.
    module = types.ModuleType("renamed.mod")
    module.__file__ = str(tmp_path / "elsewhere.py")
    monkeypatch.setitem(sys.modules, "renamed.mod", module)
    assert ModuleNames().of(str(tmp_path / "elsewhere.py")) == "renamed.mod"


def test_selector_follows_includes_minus_excludes_and_never_itself(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    selector = Selector(["pkg", "tracing"], ["pkg.data"])
    assert selector.selects(code_in(str(tmp_path / "pkg" / "model.py")))
    assert not selector.selects(code_in(str(tmp_path / "pkg" / "data" / "loader.py")))
    assert not selector.selects(code_in(str(tmp_path / "other" / "x.py")))
    import tracing.tracer
    assert not selector.selects(tracing.tracer.Tracer.start.__code__)  # even when "tracing" is included


def test_start_at_matcher(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    names = ModuleNames()
    source = "class Engine:\n    def f(self):\n        pass\n"
    namespace: dict = {}
    exec(compile(source, str(tmp_path / "megatron" / "training.py"), "exec"), namespace)
    code = namespace["Engine"].f.__code__
    assert function_matcher("f", names)(code)
    if sys.version_info >= (3, 11):  # co_qualname
        assert function_matcher("Engine.f", names)(code)
    assert function_matcher("megatron.training:f", names)(code)
    assert not function_matcher("other.module:f", names)(code)
    assert not function_matcher("g", names)(code)
    with pytest.raises(ValueError):
        function_matcher("megatron.training:", names)
