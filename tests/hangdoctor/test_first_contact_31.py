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


def test_the_gpu_hint_says_it_assumes_a_gpu_where_the_dumps_cannot_tell_and_is_not_given_where_none_is_used():
    # fej's DeepSpeed loader case (CPU, gloo): py-spy's text says nothing of a GPU; attach's collector knows none
    text = [h for h in verdict("fej_ds_loader_getitem_retry_same_index", "text/s1")["hints"] if "on the GPU" in h]
    assert text and all(h.startswith("if the job runs on GPUs, ") for h in text), text
    assert not any("on the GPU" in h for h in verdict("fej_ds_loader_getitem_retry_same_index")["hints"])
