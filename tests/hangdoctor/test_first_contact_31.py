"""What the 31st first-contact batch (fek, fel) showed read wrong around right verdicts, checked on its own
recordings."""

from tests.hangdoctor.corpus.check import CORPUS, run_entry


def verdict(case: str, form: str = "attach") -> dict:
    code, found, err = run_entry(CORPUS / case, {"paths": [form]})
    assert code in (0, 1), err
    return found


def test_every_rank_in_the_store_gets_the_rendezvous_hint_not_the_collective_one():
    # `--dist-url tcp://...` under torchrun: every rank a client of a store nobody serves (pytorch PR #191989)
    hints = verdict("fek_torchrun_dist_url_agent_store")["hints"]
    assert any("MASTER_ADDR" in h and "c10d store" in h for h in hints), hints
    assert not any("NCCL_DEBUG" in h or "different tensors" in h for h in hints), hints
