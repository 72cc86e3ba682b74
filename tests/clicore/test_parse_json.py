"""clicore.inputs.parse_json: orjson's fast path must read exactly what json reads and refuse with json's words.

Each document is parsed twice in one test: with orjson (when installed) and with it switched off, and the two
results (a value, or the refusal's message) must be equal. The one difference: an integer beyond 64 bits is a
float to orjson (every field we read that holds a whole number is checked for its type and range, so such a
value is refused either way).
"""

from __future__ import annotations

import pytest

from hangdoctor.clicore import inputs
from hangdoctor.clicore.inputs import InputRefused, parse_json

DOCUMENTS = [
    '{"a": [1, 2.5, -0.0, true, null, "x"]}',
    '{"s": "\\ud800"}',  # a lone surrogate: json reads it
    '{"k": 1, "k": 2}',  # the last one wins in both
    '{"n": NaN}',
    '{"n": -Infinity}',
    "[" * 5000 + "]" * 5000,  # deeper than orjson's limit and json's recursion
    '{"a": 1',
    '\ufeff{"bom": 1}',
    "  [1]  ",
    b'{"bytes": "\xc3\xa9"}',
    '{"ctl": "a\u0001b"}',  # a raw control character: refused by both
]


def _outcome(text):
    try:
        return "value", parse_json(text, where="f.json")
    except InputRefused as exc:
        return "refused", str(exc)


@pytest.mark.parametrize("text", DOCUMENTS, ids=range(len(DOCUMENTS)))
def test_orjson_and_json_agree(text, monkeypatch):
    if inputs.orjson is None:
        pytest.skip("orjson is not installed: only json's path exists")
    fast = _outcome(text)
    monkeypatch.setattr(inputs, "orjson", None)
    assert fast == _outcome(text)


def test_integers_beyond_64_bits_are_floats_to_orjson(monkeypatch):
    text = '{"big": 123456789012345678901234567890, "fits": 18446744073709551615}'
    if inputs.orjson is not None:
        assert parse_json(text, where="f") == {"big": 1.2345678901234568e29, "fits": 18446744073709551615}
    monkeypatch.setattr(inputs, "orjson", None)
    assert parse_json(text, where="f") == {"big": 123456789012345678901234567890, "fits": 18446744073709551615}


def test_refusals_name_the_file():
    assert _outcome('{"n": NaN}') == ("refused", "f.json: not valid JSON (NaN is not a JSON number)")
    kind, message = _outcome("[" * 100000 + "]" * 100000)
    assert kind == "refused" and message == "f.json: JSON nested too deeply to read"
