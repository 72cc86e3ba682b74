"""The C hook beside another user of CPython's frame-evaluation hook: torch.compile (TorchDynamo). Both want PEP
523's one slot per interpreter; tracing must neither break the compiled program nor lose the calls around it."""

from __future__ import annotations

from tests.tracing.helpers import FIXTURES, tracing_cli
from tracing.ringreader import read_ring


def test_torch_compile_runs_under_the_c_hook_and_no_call_is_lost(tmp_path):
    out = tmp_path / "traces"
    done = tracing_cli("run", "--backend", "c", "--include", "__main__", "--out", str(out), "--",
                       str(FIXTURES / "dynamo_user.py"), timeout=300)
    assert done.returncode == 0 and "Warning" not in done.stderr, done.output
    (ring,) = out.glob("trace-*.ring")
    trace = read_ring(str(ring))
    calls = [(e.word, e.loc.qualname) for e in trace.events if e.loc.qualname != "<module>"]
    assert calls == [("call", "main"), ("call", "before_compile"), ("ret", "before_compile"),
                     *[("call", "compiled_body"), ("ret", "compiled_body")] * 3,
                     *[("call", "after_reset"), ("ret", "after_reset")] * 2, ("ret", "main")], calls
    assert trace.state_word == "exited"
