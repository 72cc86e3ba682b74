"""Node lists without scontrol: the seed's Jean Zay names, zero padding, products, malformed lists."""

import random

import pytest

from slurm.nodelist import compress_nodelist, expand_nodelist


def test_expands_the_jean_zay_form_with_padding_and_a_second_prefix():
    assert expand_nodelist("jean-zay-iam[01-05,07],gpu[1-2]") == [
        "jean-zay-iam01", "jean-zay-iam02", "jean-zay-iam03", "jean-zay-iam04", "jean-zay-iam05",
        "jean-zay-iam07", "gpu1", "gpu2",
    ]


@pytest.mark.parametrize("text, expected", [
    ("n1", ["n1"]),
    ("n[8-11]", ["n8", "n9", "n10", "n11"]),
    ("n[08-11]", ["n08", "n09", "n10", "n11"]),
    ("n[098-101]", ["n098", "n099", "n100", "n101"]),
    ("r[1-2]n[1-2]", ["r1n1", "r1n2", "r2n1", "r2n2"]),
    ("node[1-2]-ib", ["node1-ib", "node2-ib"]),
    ("a,b,c[3]", ["a", "b", "c3"]),
    ("  n[1-2]  ", ["n1", "n2"]),
])
def test_expansions_match_scontrol_show_hostnames(text, expected):
    assert expand_nodelist(text) == expected


@pytest.mark.parametrize("text, fragment", [
    ("", "empty"),
    ("n[1-3", "never closed"),
    ("n1-3]", "']' without '['"),
    ("n[[1-2]]", "nested"),
    ("n[3-1]", "runs backwards"),
    ("n[a-b]", "not a number"),
    ("n[1-]", "not a number"),
    ("n[]", "not a number"),
    ("n1,,n2", "empty name"),
    ("n[1-99999999]", "more than"),
    ("n 1", "whitespace"),
])
def test_malformed_lists_raise_one_line_value_errors(text, fragment):
    with pytest.raises(ValueError) as info:
        expand_nodelist(text)
    message = str(info.value)
    assert fragment in message and "\n" not in message and repr(text.strip()) in message


def test_compress_folds_runs_and_keeps_padding():
    assert compress_nodelist(["n1", "n2", "n3", "n7"]) == "n[1-3,7]"
    assert compress_nodelist(["jean-zay-iam01", "jean-zay-iam02", "jean-zay-iam07", "gpu1"]) == \
        "jean-zay-iam[01-02,07],gpu1"
    assert compress_nodelist(["n09", "n10", "n11"]) == "n[09-11]"
    assert compress_nodelist(["n9", "n10"]) == "n[9-10]"
    assert compress_nodelist(["login"]) == "login"


def test_compress_then_expand_gives_back_the_same_names():
    rng = random.Random(7)
    for _ in range(200):
        names = set()
        for prefix in rng.sample(["n", "gpu", "jean-zay-iam", "r1n", "cpu-"], 3):
            width = rng.choice([1, 2, 3])
            for number in rng.sample(range(0, 120), rng.randint(1, 12)):
                names.add(prefix + (str(number).zfill(width) if width > 1 else str(number)))
        names = sorted(names)
        assert sorted(expand_nodelist(compress_nodelist(names))) == names


def test_compress_rejects_names_that_cannot_be_listed():
    with pytest.raises(ValueError):
        compress_nodelist(["n[1]"])
