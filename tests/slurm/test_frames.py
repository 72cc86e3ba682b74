"""The one frame codec of both ways back from the nodes (srun's labelled lines, pdsh's "host: " lines)."""

from slurm.frames import FRAME_SIZE, MARK, decode, encode


def test_a_record_comes_back_whole_through_prefixed_and_cut_lines():
    record = {"node": "gpu017", "text": "".join(f"{i} all_reduce\n" for i in range(20000)), "n": [1, 2.5, None]}
    lines = encode(record, "gpu017")
    assert len(lines) > 3 and all(len(line) <= len(MARK) + 20 + FRAME_SIZE for line in lines)
    assert all(" " not in line.split(" ", 3)[3] for line in lines)  # a part is one word: nothing for a shell to split
    got, incomplete = decode([f"gpu017: {line}" for line in reversed(lines)])  # any order, any prefix
    assert got == [("gpu017", record)] and incomplete == {}


def test_two_writers_of_the_same_name_are_told_apart_by_their_prefix():
    """srun labels each task's lines; two tasks that both say `localhost` must not be joined into one record."""
    a, b = encode({"v": "a" * 5000}, "localhost"), encode({"v": "b" * 5000}, "localhost")
    lines = [f"{i}: {line}" for pair in zip(a, b) for i, line in zip((0, 1), pair)]
    got, incomplete = decode(lines)
    assert sorted(r["v"][0] for _, r in got) == ["a", "b"] and incomplete == {}


def test_missing_corrupt_and_non_object_frames_are_said_never_half_read():
    cut = encode({"v": list(range(3000))}, "n1")
    bad = encode({"v": 1}, "n2")
    bad = [bad[0][:-4] + "!!!!"]
    listed = encode([1, 2], "n3")  # type: ignore[arg-type]  # a JSON array is not a report
    noise = ["Warning: something", f"{MARK}n4 x/y zz", f"{MARK}only-two-fields"]
    got, incomplete = decode([*cut[:-1], *bad, *listed, *noise])
    assert got == []
    assert incomplete["n1"] == f"its report was cut short: {len(cut) - 1} of {len(cut)} parts arrived"
    assert incomplete["n2"].startswith("its report did not decode")
    assert incomplete["n3"] == "its report is not a JSON object"
    assert set(incomplete) == {"n1", "n2", "n3"}  # noise is no sender


def test_an_empty_sender_name_and_spaces_in_it_still_make_frames():
    (line,) = encode({}, "")
    assert decode([line])[0] == [("node", {})]
    (line,) = encode({}, "my node")
    assert decode([line])[0] == [("my_node", {})]
