"""What the 30th first-contact batch (fei, fej) missed at first contact, checked on its own recordings: a loop
counter's direction among ranks waiting on point-to-point exchanges, and a rank whose only child is its own forked
helper, which is no launcher."""

from tests.hangdoctor.corpus.check import CORPUS, run_entry


def verdict(case: str, form: str = "attach") -> dict:
    code, found, err = run_entry(CORPUS / case, {"paths": [form]})
    assert code in (0, 1), err
    return found


def test_the_ranks_a_pass_behind_in_a_ring_of_exchanges_are_named_not_the_one_ahead():
    # VeOmni's parity ring at 3 ranks: ranks 0 and 2 post their exchange on two groups and wait at rotation 0;
    # rank 1 finished rotation 0 and waits for them in rotation 1 (the only rank whose `rotation` differs)
    first = verdict("fei_cp_ring_parity_odd_size")["suspects"][0]
    assert first["ranks"] == [0, 2] and first["kind"] == "odd-locals"
    assert "`rotation`" in first["reason"] and "a pass further" in first["reason"]


def test_a_rank_whose_only_child_is_its_forked_helper_is_kept_as_a_rank():
    # an mp.spawn rank (no RANK in its environment) waiting on the pipe of the background generator it forked
    found = verdict("fei_spawn_val_bg_generator_fork_after_omp")
    assert found["suspects"] and found["suspects"][0]["ranks"] == [0]
    assert not any(a["role"] == "launcher" and "parent of" in a["why"] for a in found["set_aside"])
