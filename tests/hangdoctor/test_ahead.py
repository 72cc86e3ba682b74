"""Which of two ranks left the common path (analysis/ahead.py), and the source structure the collector reads for
it on the node (collector/source.py frame_blocks): real files parsed, made-up stacks."""

from hangdoctor.analysis.ahead import compare, divergence, pass_further
from hangdoctor.collector.source import frame_blocks, frame_lines
from hangdoctor.model import Frame

PROGRAM = '''\
def main(rank, steps):
    for step in range(steps):
        train_step(step)
        if rank == 3:
            evaluate()
        log(step)
    barrier()
'''


def stack(*lines):
    """A stack innermost first: a call at each line of train.py's main, then <module>."""
    return (Frame("all_reduce", "torch/distributed/distributed_c10d.py", 10),
            *(Frame("main", "train.py", line) for line in lines), Frame("<module>", "train.py", 9))


def test_the_divergence_point_is_the_outermost_shared_function_at_different_lines():
    a, b = stack(3), stack(7)
    assert divergence(a, b) == (Frame("main", "train.py", 3), Frame("main", "train.py", 7))
    other = (Frame("x", "other.py", 1), Frame("<module>", "elsewhere.py", 1))
    assert divergence(a, other) is None


def test_without_the_source_the_later_line_is_ahead_and_says_it_is_unsure():
    order = compare(stack(3), stack(7))
    assert order.ahead == 1 and not order.sure and "line 7" in order.why


def blocks_of(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(PROGRAM)
    infos = [{"samples": [{"pyspy_json": [{"frames": [
        {"filename": str(path), "short_filename": "train.py", "line": line, "name": "main"}
        for line in (3, 5, 6, 7)]}]}]}]
    found = frame_blocks(infos)
    return {("train.py", int(k.rsplit(":", 1)[1])): v for k, v in found.items()}, frame_lines(infos)


def test_the_collector_reads_loops_and_branches_around_each_line(tmp_path):
    blocks, lines = blocks_of(tmp_path)
    assert blocks[("train.py", 3)] == {"loops": [[2, 6]], "conditions": [], "withs": [], "loop_vars": [[2, 6, ["step"]]],
                                       "tests": [], "with_items": []}
    assert blocks[("train.py", 5)] == {"loops": [[2, 6]], "conditions": [[5, 5]], "withs": [],
                                       "loop_vars": [[2, 6, ["step"]]], "tests": [[5, 5, "rank == 3"]],
                                       "with_items": []}
    assert blocks[("train.py", 7)] == {"loops": [], "conditions": [], "withs": [], "loop_vars": [], "tests": [],
                                       "with_items": []}
    assert lines["train.py:5"] == "evaluate()" and lines["train.py:7"] == "barrier()"


def test_a_rank_past_the_loop_is_ahead_of_one_inside_it(tmp_path):
    blocks, _ = blocks_of(tmp_path)
    order = compare(stack(3), stack(7), blocks)
    assert order.ahead == 1 and order.sure and "after the loop" in order.why


def test_two_lines_of_one_loop_body_have_a_guessed_order_only(tmp_path):
    # lines 3 and 6 both run in every pass: a rank at line 3 may be a pass further than one at line 6
    blocks, _ = blocks_of(tmp_path)
    order = compare(stack(3), stack(6), blocks)
    assert order.ahead == 1 and not order.sure and "both in the loop at lines 2-6" in order.why


def test_a_rank_on_the_loops_own_line_is_fetching_one_more_item(tmp_path):
    """`for step in ...` itself (a DataLoader's __next__ below it): the rank behind takes one more item, which the
    rank past the loop did not get; a rank inside the loop's body is not fetching (causes.py weighs the two)."""
    path = tmp_path / "train.py"
    path.write_text(PROGRAM)
    infos = [{"samples": [{"pyspy_json": [{"frames": [
        {"filename": str(path), "short_filename": "train.py", "line": line, "name": "main"} for line in (2, 3, 7)]}]}]}]
    blocks = {("train.py", int(k.rsplit(":", 1)[1])): v for k, v in frame_blocks(infos).items()}
    fetching = compare(stack(2), stack(7), blocks)
    assert fetching.ahead == 1 and fetching.left_loop and fetching.fetching
    in_body = compare(stack(3), stack(7), blocks)
    assert in_body.ahead == 1 and in_body.left_loop and not in_body.fetching


def test_the_rank_in_a_branch_the_others_did_not_take_is_off_the_path_whatever_the_line_order(tmp_path):
    blocks, _ = blocks_of(tmp_path)
    order = compare(stack(6), stack(5), blocks)  # line 6 comes later, but line 5 is inside `if rank == 3`
    assert order.ahead == 1 and order.sure and "branch" in order.why


def test_the_loop_counter_in_the_locals_says_which_rank_is_a_pass_further(tmp_path):
    """A rank that skipped a call went on into the next step: its counter is higher, whatever the lines' order
    (here line 5 comes after line 3, yet the rank at line 3 is in step 4 and the one at line 5 in step 3)."""
    blocks, _ = blocks_of(tmp_path)
    by_step = {key: dict(value, tests=[[5, 5, "step % 2 == 0"]]) if key == ("train.py", 5) else value
               for key, value in blocks.items()}  # as if line 5 were under `if step % 2 == 0:`, a branch all take
    order = compare(stack(3), stack(5), by_step, ({}, {"step": "4"}), ({}, {"step": "3"}))
    assert order.ahead == 0 and order.sure and order.left_loop and "`step` is 4 where the others' is 3" in order.why
    same = compare(stack(6), stack(5), by_step, ({}, {"step": "3"}), ({}, {"step": "3"}))
    # the same pass, and a branch whose test does not name the rank: every rank took it alike, so the rank at line
    # 6 went past it (the line order, a guess inside the loop); a test that names the rank sets the branch apart
    assert same.ahead == 0 and not same.sure and "branch" not in same.why
    by_rank = {key: dict(value, tests=[[5, 5, "rank == 3"]]) if key == ("train.py", 5) else value
               for key, value in blocks.items()}
    apart = compare(stack(6), stack(5), by_rank, ({}, {"step": "3"}), ({}, {"step": "3"}))
    assert apart.ahead == 1 and apart.sure and "branch" in apart.why


def test_a_branch_that_names_the_rank_wins_over_the_counter(tmp_path):
    """`if rank == 3: evaluate()`: the others skip it by design and go on into the next step; the rank in the
    branch is the one off the path, whatever the counters (the most reported shape: save or log on rank 0 only)."""
    blocks, _ = blocks_of(tmp_path)
    order = compare(stack(3), stack(5), blocks, ({}, {"step": "4"}), ({}, {"step": "3"}))
    assert order.ahead == 1 and "branch" in order.why and not order.by_counter


def test_the_pass_further_reads_the_counter_alone_whatever_the_branches(tmp_path):
    """`pass_further` answers one question, by the counter only: which rank went past the other's place in the
    loop (the receive chain asks it of a receiver in `if rank == 3:` and the rank it waits for, fev_pp_*)."""
    blocks, _ = blocks_of(tmp_path)
    assert pass_further(stack(3), stack(5), blocks, ({}, {"step": "4"}), ({}, {"step": "3"})) == 0
    assert pass_further(stack(5), stack(3), blocks, ({}, {"step": "3"}), ({}, {"step": "4"})) == 1
    assert pass_further(stack(3), stack(5), blocks, ({}, {"step": "3"}), ({}, {"step": "3"})) is None
    assert pass_further(stack(3), stack(5), blocks, None, None) is None


def test_an_unreadable_or_broken_file_gives_no_blocks(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("def main(:\n")
    infos = [{"samples": [{"pyspy_json": [{"frames": [
        {"filename": str(broken), "short_filename": "broken.py", "line": 1},
        {"filename": str(tmp_path / "gone.py"), "short_filename": "gone.py", "line": 1}]}]}]}]
    assert frame_blocks(infos) == {}


def test_the_collector_reads_with_statements_from_their_own_line(tmp_path):
    """A rank waiting to enter `with lock:` is at the statement's line; one inside it is at a later line of the
    range (analysis/waitgraph.py reads the lock's holder from that)."""
    path = tmp_path / "cache.py"
    path.write_text("def load(lock):\n    with lock:\n        build()\n        save()\n    return 1\n")
    infos = [{"samples": [{"pyspy_json": [{"frames": [
        {"filename": str(path), "short_filename": "cache.py", "line": line, "name": "load"} for line in (2, 4, 5)]}]}]}]
    found = frame_blocks(infos)
    assert found["cache.py:2"]["withs"] == [[2, 4]] and found["cache.py:4"]["withs"] == [[2, 4]]
    assert found["cache.py:5"]["withs"] == []


BRANCHES = '''\
def main(rank, schedule):
    if rank == 0:
        schedule.step(1)
    elif rank == 2:
        schedule.step(2)
    else:
        schedule.step(3)
'''


def test_the_branches_of_one_if_have_no_order_and_the_function_they_all_call_decides(tmp_path):
    """`if rank == 0: step(x) elif last: step(target) else: step()` (torch.distributed.pipelining's tutorial):
    line 7 does not come after line 3 in any run. The schedule's own lines, one level down, still order them."""
    path = tmp_path / "train.py"
    path.write_text(BRANCHES)
    infos = [{"samples": [{"pyspy_json": [{"frames": [
        {"filename": str(path), "short_filename": "train.py", "line": line, "name": "main"} for line in (3, 5, 7)]}]}]}]
    blocks = {("train.py", int(k.rsplit(":", 1)[1])): v for k, v in frame_blocks(infos).items()}

    def at(main_line, step_line):
        return (Frame("wait", "sched.py", 90), Frame("step", "sched.py", step_line), Frame("main", "train.py", main_line),
                Frame("<module>", "train.py", 9))
    assert compare(at(3, 40), at(7, 40), blocks) is None  # the same line below: nothing tells
    assert compare(at(5, 40), at(7, 40), blocks) is None  # elif against else
    order = compare(at(3, 60), at(7, 40), blocks)
    assert order.ahead == 0 and "line 60 of step" in order.why
    unsure = compare(at(3, 40), at(7, 40))  # without the source: the lines' order, unsure, as before
    assert unsure.ahead == 1 and not unsure.sure


def test_a_branch_on_the_rank_is_marked_so_the_counts_can_decide(tmp_path):
    """`if rank == 3: evaluate()` splits the ranks by design: the order says which side is in the branch, and marks
    it, so that the cause is read from the counts (causes.py: the many inside an `else:` of `if is_main_process:`
    are not the ones off the path)."""
    blocks, _ = blocks_of(tmp_path)
    order = compare(stack(6), stack(5), blocks)
    assert order.ahead == 1 and order.rank_branch
    by_step = {key: dict(value, tests=[[5, 5, "step % 2 == 0"]]) if key == ("train.py", 5) else value
               for key, value in blocks.items()}
    assert not compare(stack(6), stack(5), by_step).rank_branch  # a branch on the data, not on the rank


def test_a_branch_on_a_named_rank_sets_its_side_off_the_path_outside_any_loop(tmp_path):
    # the shape of runai-model-streamer#165: `if dp_rank == 0: stream()` (a world broadcast inside), then every
    # rank's loop of data-parallel broadcasts: the ranks in the branch went where the others never go
    program = ("def main(rank):\n    dp_rank = rank // 2\n    if dp_rank == 0:\n        stream()\n"
               "    for name in names:\n        broadcast(name)\n")
    path = tmp_path / "load.py"
    path.write_text(program)
    infos = [{"samples": [{"pyspy_json": [{"frames": [
        {"filename": str(path), "short_filename": "load.py", "line": line, "name": "main"} for line in (4, 6)]}]}]}]
    blocks = {("load.py", int(k.rsplit(":", 1)[1])): v for k, v in frame_blocks(infos).items()}

    def at(line):
        return (Frame("broadcast", "torch/distributed/distributed_c10d.py", 10), Frame("main", "load.py", line),
                Frame("<module>", "load.py", 9))
    order = compare(at(4), at(6), blocks)
    assert order.ahead == 0 and order.sure and order.rank_branch and "branch on the rank" in order.why
    assert compare(at(4), at(6)).ahead == 1  # without the source, the later line


def test_a_rank_branch_inside_a_branch_both_lines_share_is_still_off_the_path(tmp_path):
    # the shape of DeepSpeed#7117 (first-contact batch feg): every LOG_EVERY steps rank 0 alone gathers the full
    # gradients (a collective on ZeRO's group) inside `if rank == 0:`, then every rank averages the loss; the
    # `if step % LOG_EVERY == 0:` around both lines is a branch they share, not a path one side took alone
    program = ("def main(rank, steps):\n    for step in range(steps):\n        if step % 10 == 0:\n"
               "            if rank == 0:\n                gather_grads()\n            average_loss()\n"
               "        step_optimizer()\n")
    path = tmp_path / "log.py"
    path.write_text(program)
    infos = [{"samples": [{"pyspy_json": [{"frames": [
        {"filename": str(path), "short_filename": "log.py", "line": line, "name": "main"} for line in (5, 6)]}]}]}]
    blocks = {("log.py", int(k.rsplit(":", 1)[1])): v for k, v in frame_blocks(infos).items()}

    def at(line):
        return (Frame("all_reduce", "torch/distributed/distributed_c10d.py", 10), Frame("main", "log.py", line),
                Frame("<module>", "log.py", 9))
    order = compare(at(5), at(6), blocks)
    assert order.ahead == 0 and order.sure and order.rank_branch and "branch of an if" in order.why
    assert not compare(at(5), at(6)).sure  # without the source: the line order, a guess


def test_what_follows_an_if_that_ends_in_continue_is_its_else(tmp_path):
    # a hand-written pipeline (pytorch/pytorch#120741's shape, first-contact batch fek): the last stage's branch
    # ends in `continue`, the other stages' path follows it: two exclusive paths, whose line order says nothing
    program = ("def main(rank, last, steps):\n    for step in range(steps):\n        forward()\n        if last:\n"
               "            clip_and_step()\n            continue\n        recv_grad()\n        backward()\n")
    path = tmp_path / "pipe.py"
    path.write_text(program)
    infos = [{"samples": [{"pyspy_json": [{"frames": [
        {"filename": str(path), "short_filename": "pipe.py", "line": line, "name": "main"} for line in (5, 7)]}]}]}]
    blocks = {("pipe.py", int(k.rsplit(":", 1)[1])): v for k, v in frame_blocks(infos).items()}
    assert [7, 8, "not last"] in blocks[("pipe.py", 7)]["tests"]

    def at(line):
        return (Frame("wait", "torch/distributed/distributed_c10d.py", 10), Frame("main", "pipe.py", line),
                Frame("<module>", "pipe.py", 9))
    assert compare(at(5), at(7), blocks) is None  # no order between the two paths
    assert compare(at(5), at(7)).ahead == 1  # without the source, the later line


DISPATCH = '''\
def validate(rank, last, steps):
    for step in range(steps):
        if rank == 0:
            schedule_step(step)
        elif last:
            schedule_step_with_loss(step)
        else:
            schedule_step(step)
        all_reduce()
'''


def test_an_else_arm_the_other_rank_is_past_is_no_branch_it_skipped(tmp_path):
    # `if rank == 0 / elif last / else` sends every rank down one arm (torch.distributed.pipelining's per-stage
    # schedule.step calls, the 39th first-contact batch): rank 0 past the if, at the all_reduce, took its own arm;
    # a rank still in the else arm is not off the path for that (the lines' order stands, unsure)
    path = tmp_path / "train.py"
    path.write_text(DISPATCH)
    infos = [{"samples": [{"pyspy_json": [{"frames": [
        {"filename": str(path), "short_filename": "train.py", "line": line, "name": "main"} for line in (4, 8, 9)]}]}]}]
    blocks = {("train.py", int(k.rsplit(":", 1)[1])): v for k, v in frame_blocks(infos).items()}
    order = compare(stack(9), stack(8), blocks)
    assert order.ahead == 0 and not order.rank_branch and "branch" not in order.why
    # the arm of `if rank == 0:` itself is a branch on the rank that a rank past it need not have taken
    order = compare(stack(9), stack(4), blocks)
    assert order.ahead == 1 and "branch" in order.why


JOINED = '''\
def main(rank, loader):
    with Join([model]):
        for batch in loader:
            step(batch)
            gather(batch)
        print("joined")
    barrier()
'''


def test_a_rank_leaving_a_with_block_is_past_every_line_of_it(tmp_path):
    # CPython reports the `with` line while a block is left: a rank in `Join.__exit__` (ffe's uneven-input Join,
    # the 40th first-contact batch) stands on line 2, yet it has left the loop that a rank in gather (line 5) is in
    path = tmp_path / "train.py"
    path.write_text(JOINED)
    infos = [{"samples": [{"pyspy_json": [{"frames": [
        {"filename": str(path), "short_filename": "train.py", "line": line, "name": "main"} for line in (2, 5)]}]}]}]
    blocks = {("train.py", int(k.rsplit(":", 1)[1])): v for k, v in frame_blocks(infos).items()}
    leaving = (Frame("all_reduce", "torch/distributed/distributed_c10d.py", 10),
               Frame("Join.__exit__", "torch/distributed/algorithms/join.py", 270), *stack(2)[1:])
    order = compare(leaving, stack(5), blocks)
    assert order.ahead == 0 and order.sure and order.left_loop
    assert "the end of the with block (line 6)" in order.why and order.lines == (2, 5)
    # entering the block is not leaving it: the line order stands (line 5 after line 2)
    entering = (leaving[0], Frame("Join.__enter__", "torch/distributed/algorithms/join.py", 260), *stack(2)[1:])
    assert compare(entering, stack(5), blocks).ahead == 1
    # without the source nothing says where the block ends
    assert compare(leaving, stack(5)).ahead == 1


ONCE = '''\
def main(engine):
    for step in range(2):
        engine.train_batch()
    engine.eval_batch()
'''


def test_one_pass_needs_every_shared_loop_counted_alike(tmp_path):
    # `one_pass`: two ranks inside one engine call can be told from this step and the next only where each loop
    # around the shared lines has a counter the locals hold alike, or there is no loop (the 42nd batch's eval_batch)
    from hangdoctor.analysis.ahead import one_pass
    path = tmp_path / "train.py"
    path.write_text(ONCE)
    infos = [{"samples": [{"pyspy_json": [{"frames": [
        {"filename": str(path), "short_filename": "train.py", "line": line, "name": "main"} for line in (3, 4)]}]}]}]
    blocks = {("train.py", int(k.rsplit(":", 1)[1])): v for k, v in frame_blocks(infos).items()}
    for at in (10, 20):  # the engine's own lines, where the ranks part: in no loop of that function
        blocks[("engine.py", at)] = {"loops": [], "conditions": [], "withs": [], "loop_vars": []}

    def engine(name, line, at):
        return (Frame(name, "engine.py", at), Frame("main", "train.py", line))
    evaluating = engine("eval_batch", 4, 10), engine("eval_batch", 4, 20)
    assert one_pass(*evaluating, blocks, None, None)  # no loop around line 4: it runs once
    training = engine("train_batch", 3, 10), engine("train_batch", 3, 20)
    assert not one_pass(*training, blocks, None, None)  # in the loop, no counter read: this step or the next
    alike, apart = ({}, {"step": "1"}), ({}, {"step": "0"})
    assert one_pass(*training, blocks, alike, alike)
    assert not one_pass(*training, blocks, alike, apart)
    assert not one_pass(*evaluating, None, None, None)  # without the source nothing is known
