"""The topology module: rank <-> coordinates in Megatron's order and others, groups, readable rank sets."""

import itertools

import pytest

from hangdoctor.topology import ParallelDims, describe_ranks, fold_ranks, parse_ranks


def test_default_order_is_megatron_tp_fastest_then_dp_then_pp():
    dims = ParallelDims(tp=2, pp=2, dp=2)
    got = [(c.tp, c.dp, c.pp) for c in dims.all_coords()]
    assert got == [(t, d, p) for p in range(2) for d in range(2) for t in range(2)]


def test_matches_picotron_view_for_order_tp_pp_dp():
    # picotron: torch.arange(world).view(dp, pp, tp)
    dims = ParallelDims(tp=2, pp=3, dp=2, order="tp-pp-dp")
    for dp, pp, tp in itertools.product(range(2), range(3), range(2)):
        assert dims.rank(dp=dp, pp=pp, tp=tp) == (dp * 3 + pp) * 2 + tp


@pytest.mark.parametrize("order", ["tp-dp-pp", "tp-pp-dp", "pp-dp-tp", "dp-tp-pp"])
def test_rank_and_coords_are_inverse(order):
    dims = ParallelDims(tp=2, pp=3, dp=4, order=order)
    seen = set()
    for rank in range(dims.world_size):
        c = dims.coords(rank)
        assert dims.rank(dp=c.dp, pp=c.pp, tp=c.tp) == rank
        seen.add((c.dp, c.pp, c.tp))
    assert len(seen) == 24


def test_groups_match_deepspeed_pipe_groups():
    dims = ParallelDims(tp=2, pp=2, dp=2)
    assert dims.groups("pp") == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert dims.groups("dp") == [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert dims.groups("tp") == [[0, 1], [2, 3], [4, 5], [6, 7]]


def test_from_world_error_names_every_factor():
    with pytest.raises(ValueError, match=r"world size 6 is not divisible by tp=2 x pp=2 = 4"):
        ParallelDims.from_world(6, tp=2, pp=2)
    assert ParallelDims.from_world(8, tp=2, pp=2).dp == 2


def test_bad_sizes_and_orders_are_value_errors():
    with pytest.raises(ValueError, match="tp=0"):
        ParallelDims(tp=0)
    with pytest.raises(ValueError, match="exactly once"):
        ParallelDims(order="tp-tp-pp")
    with pytest.raises(ValueError, match="outside the world"):
        ParallelDims(tp=2).coords(2)


def test_fold_and_parse_ranks_round_trip():
    ranks = [0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 12, 13, 20]
    assert fold_ranks(ranks) == "0-5,8-13,20"
    assert parse_ranks("0-5,8-13,20") == ranks
    assert fold_ranks([]) == ""
    with pytest.raises(ValueError, match="bad rank range"):
        parse_ranks("3-1")
    with pytest.raises(ValueError, match="goes past rank 4,194,303"):  # not minutes and gigabytes of expansion
        parse_ranks("0-99999999999")


def test_describe_ranks_by_coordinates():
    dims = ParallelDims(tp=2, pp=2, dp=2)
    assert describe_ranks([4, 5, 6, 7], dims) == "pp=1 (all tp, all dp)"
    assert describe_ranks([0, 2], dims) == "pp=0 tp=0 (all dp)"
    assert describe_ranks(range(8), dims) == "all ranks"
    assert describe_ranks([0, 1, 2, 3, 5], dims) == "pp=0 (all tp, all dp); pp=1 dp=0 tp=1"
    assert describe_ranks([9], dims) == "ranks 9"
    assert describe_ranks([1, 2], None) == "ranks 1-2"


def test_describe_ranks_falls_back_to_folded_ranks_when_too_scattered():
    dims = ParallelDims(tp=2, pp=4, dp=4)
    scattered = [0, 3, 9, 14, 20, 27]  # no two in one box: six phrases would be harder to read than the ranks
    assert describe_ranks(scattered, dims) == "ranks 0,3,9,14,20,27"
    big = ParallelDims(tp=8, pp=16, dp=64)
    assert describe_ranks(big.ranks_where(pp=3) + big.ranks_where(pp=5, dp=7), big) == "pp=3 (all tp, all dp); pp=5 dp=7 (all tp)"


def test_group_axes_and_strides_agree_with_coordinates_in_every_order():
    """group_axes works by arithmetic on strides (fast at 100k ranks); a hand-checked case, then the coordinates
    as the reference in each order."""
    import itertools
    import random

    from hangdoctor.topology import group_axes

    dims = ParallelDims(tp=2, pp=3, dp=4)  # tp-dp-pp: tp stride 1, dp stride 2, pp stride 8
    assert (dims.stride("tp"), dims.stride("dp"), dims.stride("pp")) == (1, 2, 8)
    assert group_axes([1, 9, 17], dims) == ("pp",)  # tp=1 dp=0, pp 0..2
    rng = random.Random(3)
    for order in ("-".join(p) for p in itertools.permutations(("tp", "dp", "pp"))):
        dims = ParallelDims(tp=2, pp=3, dp=4, order=order)
        for _ in range(50):
            ranks = rng.sample(range(24), rng.randint(1, 6))
            coords = [dims.coords(r) for r in ranks]
            expected = tuple(a for a in ("tp", "pp", "dp") if len({getattr(c, a) for c in coords}) > 1)
            assert group_axes(ranks, dims) == expected, (order, ranks)
