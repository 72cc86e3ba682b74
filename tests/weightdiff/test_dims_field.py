"""A dump's parallel sizes are ParallelDims (topology), read from the sidecar's "dims" once, with its checks."""

import pytest

from hangdoctor.topology import ParallelDims
from weightdiff.records import dims_from_json


def test_a_sidecars_dims_become_parallel_dims():
    assert dims_from_json({"tp": 2, "pp": 2, "dp": 1}) == ParallelDims(tp=2, pp=2, dp=1)
    assert dims_from_json({"pp": 4}) == ParallelDims(pp=4)  # sizes the writer did not know are 1
    assert dims_from_json({"tp": 2, "order": "pp-dp-tp"}).axes == ("pp", "dp", "tp")
    assert dims_from_json(None) is None


@pytest.mark.parametrize("bad", [{"tp": 0}, {"dp": "2"}, {"pp": True}, [2, 2, 1]])
def test_sizes_that_are_not_positive_integers_are_a_malformed_sidecar(bad):
    with pytest.raises(ValueError):
        dims_from_json(bad)
