"""Every corpus case (tests/hangdoctor/corpus/): `hangdoctor analyze --json` on each recorded form of the hang
gives the verdict a careful engineer would: the first suspect, the innocent, each rank's wait kind, launchers
and workers set aside, the hints. The cases come from public examples and public issue threads (named in each
case.json); see corpus/README.md."""

import pytest

from tests.hangdoctor.corpus.check import cases, dishonest, entries, form_name, known_miss, misreads, problems, run_entry

def _marks(case, entry) -> list:
    """A form the case names as a known miss (its `known_miss`) is expected to fail, strictly: the day it passes,
    the test says so, and the case's note must go."""
    why = known_miss(case, entry)
    return [pytest.mark.xfail(reason=why, strict=True)] if why else []


PARAMS = [pytest.param(case, entry, expect, id=f"{case.name}:{form_name(entry)}", marks=_marks(case, entry))
          for case in cases() for entry, expect in entries(case)]


def test_the_corpus_is_big_enough():
    assert len(cases()) >= 14, [c.name for c in cases()]


@pytest.mark.parametrize("case,entry,expect", PARAMS)
def test_corpus_case(case, entry, expect):
    code, verdict, stderr = run_entry(case, entry)
    assert verdict, f"no verdict (exit {code}): {stderr}"
    found = problems(verdict, expect, code)
    assert not found, "\n".join(found + ["", verdict["headline"], *(f"suspect {s['folded']}: {s['kind']} "
                                         f"{s['confidence']}: {s['reason']}" for s in verdict["suspects"]),
                                         *(f"hint: {h}" for h in verdict["hints"])])


_MISSED = [(p.values[0], p.values[1], p.values[2]) for p in PARAMS]
_MISSED = [(case, entry, expect) for case, entry, expect in _MISSED if known_miss(case, entry)]
# each known-miss dump form as recorded, and read with the job's code too (what `analyze` does where it is at hand)
HONEST = [pytest.param(case, entry, expect, id=f"{case.name}:{form_name(entry)}") for case, entry, expect in _MISSED
          if not misreads(case, entry)] + [
    pytest.param(case, {**entry, "source": True}, expect, id=f"{case.name}:{form_name({**entry, 'source': True})}")
    for case, entry, expect in _MISSED if not entry.get("source") and entry["paths"] != ["attach"]
    and not misreads(case, {**entry, "source": True})]


@pytest.mark.parametrize("case,entry,expect", HONEST)
def test_a_known_miss_blames_nobody_with_confidence(case, entry, expect):
    """A form that lacks the evidence for the truth (a known miss) may read a wait unknown, tie, or guess low: it
    may not name an innocent rank, or a first suspect the truth does not name, with medium or high confidence.
    (The few cases that still do say so: known_miss's "misreads".)"""
    code, verdict, stderr = run_entry(case, entry)
    assert verdict, f"no verdict (exit {code}): {stderr}"
    found = dishonest(verdict, expect)
    assert not found, "\n".join(found + [f"suspect {s['folded']}: {s['kind']} {s['confidence']}: {s['reason']}"
                                         for s in verdict["suspects"]])
