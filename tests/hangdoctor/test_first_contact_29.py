"""What the 29th first-contact batch (fef, feg: right first suspects at first contact) showed read wrong around
the verdict, checked on its own recordings: a DataLoader worker blocked inside its Dataset is not waiting for work,
DDP's forward set-up is a collective, a c10d store's constructor is a store wait."""

from tests.hangdoctor.corpus.check import CORPUS, run_entry


def verdict(case: str, form: str = "attach") -> dict:
    code, found, err = run_entry(CORPUS / case, {"paths": [form]})
    assert code in (0, 1), err
    return found


def kinds(found: dict) -> dict:
    return {r["rank"]: r["activity"] for r in found["ranks"]}


def test_a_worker_blocked_in_its_datasets_future_is_named_not_called_idle():
    hints = verdict("fef_loader_fork_decode_pool_rank0_stats")["hints"]
    loader = [h for h in hints if "DataLoader" in h]
    assert loader and "(of rank 0) is in Condition.wait" in loader[0] and "Future.result" in loader[0]
    assert not any("all wait for work" in h for h in hints)


def test_ddps_forward_set_up_is_read_as_a_collective_on_every_form():
    for form in ("text/s1", "locals", "json", "attach"):
        found = verdict("feg_lightning_worker_fog_aug_spin", form)
        assert kinds(found)[0] == kinds(found)[2] == "collective", (form, kinds(found))


def test_a_store_constructor_is_a_store_wait_where_the_source_line_is_known():
    assert kinds(verdict("fef_side_store_master_counts_launcher"))[0] == "store"
    # py-spy's JSON carries no source line: the constructor's C++ wait stays unknown there
    assert kinds(verdict("fef_side_store_master_counts_launcher", "json"))[0] != "store"
