"""Analysis on recorded dumps of real hung processes, and on small hand-made collections."""

from dataclasses import replace
from pathlib import Path

from hangdoctor.analysis.ranks import PROGRESSING, STUCK, UNKNOWN
from hangdoctor.analysis.verdict import diagnose
from hangdoctor.formats.load import load_paths
from hangdoctor.identity import TopologyFlags
from hangdoctor.model import OK, STOPPED, Collection, Frame, RankIdentity, RankRecord, Sample, ThreadStack
from hangdoctor.topology import ParallelDims

DATA = Path(__file__).parent / "data"
ENGINE = "deepspeed/runtime/pipe/engine.py"


def verdict_of(*paths, **flags):
    return diagnose(load_paths([DATA / p for p in paths], TopologyFlags(**flags)))


def place(verdict, ranks):
    return next(p for p in verdict.places if p.ranks == ranks)


def test_trainer_skip_loss_broadcast_names_ranks_coordinates_and_frames():
    v = verdict_of("trainer_pp2dp2_skip_loss_broadcast.node.json")
    assert v.hung is True and v.responded == [0, 1, 2, 3] and not v.unresponsive
    first = place(v, [0, 1])
    assert first.where == "pp=0 (all dp)" and first.progress == {STUCK: 2}
    assert first.position == f"broadcast <- PipelineEngine._aggregate_total_loss ({ENGINE})"
    last = place(v, [2, 3])
    assert last.where == "pp=1 (all dp)"
    assert last.position == f"recv <- PipelineEngine._exec_recv_activations ({ENGINE})"
    [suspect] = v.suspects
    assert suspect.ranks == [2, 3] and suspect.kind == "other-call" and suspect.confidence == "medium"
    # said once, by the suspect: the last stage never entered the loss broadcast, being in the next step's recv
    assert suspect.reason.startswith("never entered the broadcast of the loss from the last stage that ranks 0-1 "
                                     "wait in; they are already in the receive of activations")
    assert not any("never entered" in h for h in v.hints)
    assert v.causes[0].rule == "schedule" and v.causes[0].waiting == [0, 1]


def test_trainer_native_text_dump_gives_the_same_places():
    v = verdict_of("trace-trainer-native.out", pp=2)
    assert [(p.ranks, p.wait.op) for p in v.places] == [([0, 1], "broadcast"), ([2, 3], "recv")]
    assert v.hung is None, "one sample cannot tell stuck from slow"
    assert any("--samples" in h for h in v.hints)


def test_gloo_mixed_hang_stopped_rank_and_straggler():
    v = verdict_of("gloo8_mixed.node.json")
    assert v.headline == "HUNG: 6 ranks stuck, 6 in 2 calls; 1 progressing; 1 did not respond (7/8 responded)"
    assert v.unresponsive == {STOPPED: [2]}
    assert v.views[7].progress == PROGRESSING and v.views[0].progress == STUCK
    bcast = place(v, [0, 1, 3])
    assert bcast.wait.op == "broadcast" and bcast.wait.caller.name == "_aggregate_total_loss"
    assert place(v, [4, 5, 6]).wait.label == "all_reduce <- train_step (hung_gloo.py)"
    kinds = {tuple(s.ranks): s.kind for s in v.suspects}
    assert kinds == {(4, 5, 6): "other-call", (7,): "straggler", (2,): "unresponsive"}
    assert any("[rank 7], still progressing (a straggler" in h for h in v.hints)
    assert any("[rank 2] did not respond (stopped)" in h for h in v.hints)


def test_tree_carries_rank_sets_on_every_edge():
    v = verdict_of("gloo8_mixed.node.json")
    root = v.tree
    assert root.ranks == list(range(8))
    [module] = root.children
    assert module.frame == Frame("<module>", "hung_gloo.py", 99) and module.ranks == list(range(8))
    assert [c.ranks for c in module.children] == [[0, 1, 3], [2], [4, 5, 6], [7]]
    leaves = [n for n in root.walk() if n.ends]
    assert sorted(r for leaf in leaves for r in leaf.ends) == list(range(8))
    for node in root.walk():
        assert set(node.ranks) >= {r for c in node.children for r in c.ranks}


def test_classes_majority_first_with_coordinates_and_nodes():
    v = verdict_of("gloo8_mixed.node.json")
    assert [(c.folded, c.status, c.majority) for c in v.classes] == [  # 3 against 3: a tie has no majority
        ("0-1,3", OK, False), ("4-6", OK, False), ("7", OK, False), ("2", STOPPED, False)]
    seed = verdict_of("seed-style", world_size=320)
    assert [(len(c.ranks), c.majority) for c in seed.classes[:2]] == [(12, True), (3, False)]
    assert v.classes[0].where == "pp=0 dp=0 (all tp); pp=0 dp=1 tp=1" and v.classes[0].hosts == ["vm"]
    assert v.classes[3].states == {"T": 1} and v.classes[3].stack[0].name == "freeze"


def test_seed_text_dumps_name_the_broadcast_and_the_ranks_outside_any_collective():
    v = verdict_of("seed-style", world_size=320)
    assert v.expected == 320 and len(v.responded) == 15 and v.unresponsive == {"gone": [15]}
    assert len(v.missing) == 320 - 16
    waiting = place(v, [6, 7, 14])
    assert waiting.position == f"broadcast <- _aggregate_total_loss ({ENGINE})"
    assert waiting.where == "pp=0 dp=0 tp=6-7; pp=0 dp=1 tp=6"
    outside = place(v, [0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 12, 13])
    assert outside.position == "outside any collective, in train (megatron/training.py)"
    assert outside.where == "pp=0 dp=0-1 tp=0-5"
    # The seed's GPU job: the 12 ranks with no communication frame are probably past the broadcast and waiting
    # on the GPU (NCCL is asynchronous): never blamed, and the hint says how to see their real frame.
    first = v.suspects[0]
    assert first.ranks == [6, 7, 14] and first.kind == "inside-call" and first.confidence == "medium"
    assert not any(set(s.ranks) & set(outside.ranks) for s in v.suspects)
    assert any("CUDA_LAUNCH_BLOCKING=1" in h and "Flight Recorder" in h for h in v.hints)


def test_seed_excerpt_one_rank_each_side_blames_nobody_confidently():
    # One rank in the broadcast, one at train:915 with no frame: with NCCL either may be the late one.
    v = verdict_of("seed-excerpt.txt")
    assert all(s.confidence == "low" for s in v.suspects)
    assert v.hints[0].startswith(f"rank 1 waits in broadcast <- _aggregate_total_loss ({ENGINE}) that rank 0 never "
                                 f"entered (rank 0 is outside any collective, in train (megatron/training.py))")
    assert any("CUDA_LAUNCH_BLOCKING=1" in h for h in v.hints)


# Hand-made collections: progress across samples, missing ranks, all in one collective.

def frames(*names):
    return tuple(Frame(n, "t.py", i + 1) for i, n in enumerate(names))


BCAST = (Frame("broadcast", "torch/distributed/distributed_c10d.py", 10), *frames("step", "main"))
REDUCE = (Frame("all_reduce", "torch/distributed/distributed_c10d.py", 20), *frames("step", "main"))


def collection(stacks_per_rank, *, world=None, dims=None, status=None):
    records = []
    for rank, stacks in stacks_per_rank.items():
        samples = [Sample(index=i, time=float(i), status=(status or {}).get(rank, OK),
                          threads=(ThreadStack(100 + rank, "MainThread", s),)) for i, s in enumerate(stacks)]
        identity = RankIdentity(rank=rank, host=f"n{rank // 4}", pid=100 + rank,
                                coords=dims.coords(rank) if dims else None)
        records.append(RankRecord(identity, samples))
    return Collection(records=records, dims=dims, world_size=world, samples=max(len(s) for s in stacks_per_rank.values()),
                      interval=1.0)


def test_changing_stacks_are_progressing_and_all_moving_is_not_hung():
    v = diagnose(collection({0: [frames("a", "main"), frames("b", "main")], 1: [frames("c", "main"), frames("a", "main")]}))
    assert v.hung is False and {x.progress for x in v.views.values()} == {PROGRESSING}
    assert v.headline.startswith("Not hung")


def test_a_moving_rank_caught_once_on_an_item_line_is_busy_not_waiting_for_the_gpu():
    # fcu_infinite_iter_empty_shard's live attach in a CI run: rank 2 spins re-creating a DataLoader iterator and
    # its last sample sat on `.item()` of a CPU seed in _BaseDataLoaderIter.__init__ (a line the source rules
    # read as a GPU sync); its other samples were elsewhere in the loop.
    spin = (Frame("__init__", "torch/utils/data/dataloader.py", 693), *frames("__iter__", "loop", "main"))
    elsewhere = (Frame("__iter__", "torch/utils/data/dataloader.py", 480), *frames("loop", "main"))
    samples = {0: [BCAST] * 3, 1: [BCAST] * 3, 2: [elsewhere, frames("loop", "main"), spin]}
    moving = collection(samples)
    moving.source_lines[("torch/utils/data/dataloader.py", 693)] = "            .item()"
    assert diagnose(moving).views[2].activity == "busy"
    still = collection({**samples, 2: [spin, spin, spin]})  # caught there every time: the line's guess stands
    still.source_lines[("torch/utils/data/dataloader.py", 693)] = "            .item()"
    assert diagnose(still).views[2].activity == "device-sync"


def test_single_sample_is_unknown():
    v = diagnose(collection({0: [BCAST], 1: [BCAST]}))
    assert v.hung is None and v.views[0].progress == UNKNOWN


def test_everyone_in_the_same_collective_points_at_the_collective_or_the_missing():
    dims = ParallelDims(tp=2, pp=2, dp=2)
    v = diagnose(collection({r: [BCAST, BCAST] for r in range(8)}, world=8, dims=dims))
    assert not v.suspects and "the collective itself is stuck" in v.hints[0]
    v = diagnose(collection({r: [BCAST, BCAST] for r in range(6)}, world=8, dims=dims))
    assert v.missing == [6, 7]
    [suspect] = v.suspects
    assert suspect.ranks == [6, 7] and suspect.kind == "unresponsive" and suspect.where == "pp=1 dp=1 (all tp)"
    assert v.headline.endswith("2 did not respond (6/8 responded)")


def test_the_rank_its_pipeline_and_data_parallel_peers_wait_for_is_the_cause():
    # PP=2 x DP=2 (ranks 0,1 stage 0; 2,3 stage 1). Rank 1 runs outside any call (its stack changes); rank 0 waits
    # for it in the data-parallel gradient all-reduce, rank 3 for it in recv_activations, rank 2 for rank 0 there:
    # the wait-for graph ends at rank 1, and the neighbour waiting for it is never ranked above it.
    dims = ParallelDims(tp=1, pp=2, dp=2)
    recv = (Frame("recv", "deepspeed/runtime/pipe/p2p.py", 81), Frame("_exec_recv_activations", ENGINE, 1120),
            Frame("_exec_schedule", ENGINE, 1387), Frame("train_batch", ENGINE, 370), *frames("main"))
    reduce = (Frame("all_reduce", "torch/distributed/distributed_c10d.py", 20),
              Frame("_exec_reduce_grads", ENGINE, 1200), Frame("_exec_schedule", ENGINE, 1387),
              Frame("train_batch", ENGINE, 370), *frames("main"))
    busy = [frames("tokenize", "main"), frames("lookup", "tokenize", "main")]
    v = diagnose(collection({0: [reduce] * 2, 1: busy, 2: [recv] * 2, 3: [recv] * 2}, dims=dims, world=4))
    assert v.suspects[0].ranks == [1] and v.suspects[0].confidence == "high"
    assert [c.ranks for c in v.causes] == [[1]] and v.causes[0].waiting == [0, 2, 3]
    assert all(s.confidence == "low" for s in v.suspects[1:])
    edges = {(tuple(v.graph.nodes[e.waiter].ranks), tuple(e.ranks), e.strength) for e in v.graph.edges}
    assert {((2, 3), (0,), "semantic"), ((2, 3), (1,), "semantic"), ((0,), (1,), "semantic")} <= edges


def test_no_collective_at_all_makes_minorities_suspects():
    v = diagnose(collection({0: [frames("load", "main")], 1: [frames("load", "main")], 2: [frames("save", "main")]}))
    [suspect] = v.suspects
    assert suspect.ranks == [2] and suspect.kind == "minority"


def test_sixteen_thousand_ranks_share_interned_stacks(benchmark_size=16384):
    dims = ParallelDims.from_world(benchmark_size, tp=8, pp=16)
    stacks = {r: [BCAST if dims.coords(r).pp < 15 else REDUCE] for r in range(benchmark_size)}
    v = diagnose(collection(stacks, world=benchmark_size, dims=dims))
    assert [p.where for p in v.places] == ["pp=0-14 (all tp, all dp)", "pp=15 (all tp, all dp)"]
    assert len(v.tree.children[0].ranks) == benchmark_size


# Suspects by evidence: what outranks what.

def test_a_timed_out_rank_never_outranks_a_rank_proven_stuck_outside_any_wait():
    busy = [frames("tokenize", "main"), frames("lookup", "tokenize", "main")]  # its stack changes: it runs
    stacks = {0: [REDUCE, REDUCE], 1: busy, 2: [REDUCE, REDUCE], 3: [REDUCE, REDUCE], 4: [REDUCE, REDUCE]}
    v = diagnose(collection(stacks, status={3: "timeout", 4: "timeout"}))
    assert [(s.ranks, s.kind, s.confidence) for s in v.suspects] == [
        ([1], "straggler", "high"), ([3, 4], "unresponsive", "low")]
    assert v.suspects[1].evidence[0] == {"type": "status", "text": "timeout"}


def test_ranks_on_a_device_sync_are_never_blamed_alone():
    sync = (Frame("cudaStreamSynchronize", "libcudart.so.12", 0, True), *frames("train", "main"))
    v = diagnose(collection({0: [sync] * 2, 1: [BCAST] * 2, 2: [BCAST] * 2, 3: [BCAST] * 2}))
    [suspect] = v.suspects
    assert (suspect.ranks, suspect.kind, suspect.confidence) == ([0], "device-sync", "low")
    assert v.views[0].activity == "device-sync" and v.views[0].gpu is True
    assert any("CUDA_LAUNCH_BLOCKING=1" in h for h in v.hints)


def test_a_rank_in_a_lock_while_the_others_communicate_is_the_prime_suspect():
    baton = (Frame("FileBaton.wait", "torch/utils/file_baton.py", 42), *frames("build", "main"))
    barrier = (Frame("barrier", "torch/distributed/distributed_c10d.py", 4000), *frames("build", "main"))
    v = diagnose(collection({0: [baton] * 2, 1: [barrier] * 2, 2: [barrier] * 2}))
    first = v.suspects[0]
    # a lock file is shared between processes: without the source, a rank in the barrier may hold it (low)
    assert (first.ranks, first.kind, first.confidence) == ([0], "local-wait", "low")
    assert first.evidence[0]["kind"] == "lock" and "lock file" in first.evidence[0]["says"]
    assert "may hold it" in first.reason
    # a lock of the rank's own threads: the others cannot hold it
    own = (Frame("Condition.wait", "threading.py", 320), Frame("Event.wait", "threading.py", 600),
           *frames("build", "main"))
    v = diagnose(collection({0: [own] * 2, 1: [barrier] * 2, 2: [barrier] * 2}))
    assert (v.suspects[0].ranks, v.suspects[0].kind, v.suspects[0].confidence) == ([0], "local-wait", "high")


def test_unknown_ranks_are_blamed_with_medium_confidence_only_when_no_gpu_is_in_use():
    outside = frames("step", "main")
    stacks = {0: [outside] * 2, 1: [REDUCE] * 2, 2: [REDUCE] * 2}
    paste = diagnose(collection(stacks))
    assert (paste.suspects[0].ranks, paste.suspects[0].confidence) == ([0], "low")
    cpu_only = collection(stacks)
    for record in cpu_only.records:
        object.__setattr__(record.identity, "gpu", False)
    v = diagnose(cpu_only)
    assert (v.suspects[0].ranks, v.suspects[0].kind, v.suspects[0].confidence) == ([0], "outside", "medium")
    assert "no GPU is in use" in v.suspects[0].reason


def test_a_call_that_waits_for_one_stage_names_that_stage_only_where_the_topology_says_which():
    # Megatron's tied-embedding all-reduce (first and last stage) on stage 0, stages 1-3 already in the next step's
    # recv_forward (PP=4). With the topology the last stage is named (medium); without it (a JSON dump: no command
    # line) any of ranks 1-3 may be the last stage: the schedule still says they went on, but naming them all is a
    # guess (low), never a confident blame of the innocent middle stages.
    finalize = "megatron/core/distributed/finalize_model_grads.py"
    embed = (Frame("all_reduce", "torch/distributed/distributed_c10d.py", 20),
             Frame("_allreduce_word_embedding_grads", finalize, 120), *frames("train_step", "main"))
    recv = (Frame("recv_forward", "megatron/core/pipeline_parallel/p2p_communication.py", 34),
            *frames("train_step", "main"))
    stacks = {0: [embed] * 2, 1: [recv] * 2, 2: [recv] * 2, 3: [recv] * 2}
    known = diagnose(collection(stacks, world=4, dims=ParallelDims(tp=1, pp=4, dp=1)))
    assert (known.suspects[0].ranks, known.suspects[0].confidence) == ([3], "medium")
    unknown = diagnose(collection(stacks, world=4))
    assert unknown.causes[0].rule == "schedule" and unknown.suspects[0].confidence == "low"
    assert all(s.confidence == "low" for s in unknown.suspects)
    edges = {(tuple(unknown.graph.nodes[e.waiter].ranks), e.strength) for e in unknown.graph.edges}
    assert ((0,), "possible") in edges and ((0,), "semantic") not in edges


def test_a_rank_past_a_gather_is_not_blamed_for_the_roots_that_wait_in_it():
    # torch.distributed.gather: its members send their part and return, only a root waits for everyone. Ranks 0 and
    # 2 wait in a gather (each took itself for the root), rank 1 sent its part and waits in the next barrier: it
    # may be past the gather, so it is no confident odd one out (pytorch/pytorch#39706's shape: fce_gather_*).
    gather = (Frame("gather", "torch/distributed/distributed_c10d.py", 30), Frame("main", "t.py", 2))
    barrier = (Frame("barrier", "torch/distributed/distributed_c10d.py", 40), Frame("main", "t.py", 9))
    v = diagnose(collection({0: [gather] * 2, 1: [barrier] * 2, 2: [gather] * 2}, world=3))
    assert all(s.confidence == "low" for s in v.suspects)
    strengths = {(tuple(v.graph.nodes[e.waiter].ranks), e.strength) for e in v.graph.edges}
    assert ((0, 2), "possible") in strengths and ((0, 2), "semantic") not in strengths
    # an all_reduce's members all wait for each other: on CPU the rank in the barrier never entered it (medium)
    for stacks, confident in (({0: [gather] * 2, 1: [barrier] * 2, 2: [gather] * 2}, False),
                              ({0: [REDUCE] * 2, 1: [barrier] * 2, 2: [REDUCE] * 2}, True)):
        cpu_only = collection(stacks, world=3)
        for record in cpu_only.records:
            object.__setattr__(record.identity, "gpu", False)
        v = diagnose(cpu_only)
        assert v.suspects[0].ranks == [1] and (v.suspects[0].confidence == "medium") is confident


def test_ranks_each_waiting_for_a_file_lock_at_two_places_are_one_cause():
    # A lock-order inversion over lock files (clcache's shape, fdr_filelock_*): rank 0 holds section 0 and waits for
    # section 1 in evict, rank 1 holds section 1 and waits for the statistics lock in add, rank 2 waits in the
    # barrier. Neither lock waiter is the cause alone: they are named together, once.
    def filelock(caller, line):
        return (Frame("BaseFileLock.acquire", "filelock/_api.py", 195), Frame(caller, "cache.py", line),
                Frame("main", "t.py", 5))
    barrier = (Frame("barrier", "torch/distributed/distributed_c10d.py", 40), Frame("main", "t.py", 9))
    v = diagnose(collection({0: [filelock("FeatureCache.evict", 61)] * 2, 1: [filelock("FeatureCache.add", 55)] * 2,
                             2: [barrier] * 2}, world=3))
    first = v.suspects[0]
    assert (first.ranks, first.confidence) == ([0, 1], "medium") and "lock-order inversion" in first.reason
    assert v.causes[0].rule == "lock-order" and v.causes[0].waiting == [2]
    # one rank alone at a file lock while the others wait for it: that rank, as before
    v = diagnose(collection({0: [filelock("FeatureCache.add", 55)] * 2, 1: [barrier] * 2, 2: [barrier] * 2}, world=3))
    assert v.suspects[0].ranks == [0] and v.causes[0].rule != "lock-order"


def test_busy_ranks_caught_at_two_points_of_one_loop_are_one_suspect():
    # `while not os.path.exists(done): pass` on ranks 1-2 (datasets#3178's salted hash, fdb_hash_*): with native
    # frames one is caught inside the stat call, the other in Python: two places, one cause.
    loop = (Frame("exists", "<frozen genericpath>", 19), Frame("wait_for_cache", "prep.py", 30), Frame("main", "t.py", 5))
    in_stat = (Frame("fstatat64", "libc.so.6", 0, True), *loop)
    barrier = (Frame("barrier", "torch/distributed/distributed_c10d.py", 40), Frame("main", "t.py", 9))
    def spinning(stacks):
        found = collection(stacks, world=3)
        for record in found.records:
            for sample in record.samples:
                sample.threads = tuple(replace(t, active=record.identity.rank != 0, owns_gil=record.identity.rank == 1)
                                       for t in sample.threads)
        return diagnose(found)

    v = spinning({0: [barrier] * 2, 1: [loop] * 2, 2: [in_stat] * 2})
    assert v.suspects[0].ranks == [1, 2] and v.suspects[0].kind == "busy" and v.causes[0].rule == "one-loop"
    # busy in two different functions: two suspects
    other = (Frame("tokenize", "prep.py", 70), Frame("main", "t.py", 5))
    v = spinning({0: [barrier] * 2, 1: [loop] * 2, 2: [other] * 2})
    assert sorted(s.ranks for s in v.suspects[:2]) == [[1], [2]]


def test_a_rank_joining_its_own_threads_shows_what_the_busy_one_does():
    # Lightning's AsyncCheckpointIO at teardown (fes_lightning_async_ckpt_*): the main thread joins the executor's
    # worker, which is stuck writing; an idle timer thread is no lead. The evidence names the writer.
    shutdown = (Frame("_wait_for_tstate_lock", "threading.py", 1139), Frame("Thread.join", "threading.py", 1119),
                Frame("ThreadPoolExecutor.shutdown", "concurrent/futures/thread.py", 235), Frame("teardown", "io.py", 88))
    timer = (Frame("Condition.wait", "threading.py", 331), Frame("Timer.run", "threading.py", 1399))
    writer = (Frame("fsync", "libc.so.6", 0, True), Frame("save_checkpoint", "io.py", 45),
              Frame("_WorkItem.run", "concurrent/futures/thread.py", 58))
    bcast = (Frame("broadcast", "torch/distributed/distributed_c10d.py", 10), Frame("main", "t.py", 5))
    found = collection({0: [shutdown] * 2, 1: [bcast] * 2})
    for sample in found.records[0].samples:
        sample.threads = (*sample.threads, ThreadStack(7, "Thread-1", timer), ThreadStack(8, "pool_0", writer))
    v = diagnose(found)
    first = v.suspects[0]
    assert first.ranks == [0] and "executor shutdown" in first.reason
    assert any(e["text"] == "its thread 'pool_0' waits in file I/O <- save_checkpoint (io.py)" for e in first.evidence)


def test_ranks_past_a_loop_are_named_with_confidence_only_where_one_group_waits_for_them():
    # A (dp, cp) 2x2 mesh (fen_cp_loss_*): ranks 1 and 3 past the step loop in the final barrier, rank 0 in the loop's
    # dp all_reduce, rank 2 in its cp all_reduce. Two calls inside the loop cannot both span the whole job: which of
    # ranks 1 and 3 each waits for (rank 1 went on by right), no edge says: low. One call inside the loop: medium.
    blocks = {("t.py", 72): {"loops": [[60, 75]], "conditions": [], "withs": [], "loop_vars": [], "tests": []},
              ("t.py", 48): {"loops": [[60, 75]], "conditions": [], "withs": [], "loop_vars": [], "tests": []},
              ("t.py", 81): {"loops": [], "conditions": [], "withs": [], "loop_vars": [], "tests": []}}
    dp = (Frame("all_reduce", "torch/distributed/distributed_c10d.py", 20), Frame("main", "t.py", 72))
    cp = (Frame("all_reduce", "torch/distributed/distributed_c10d.py", 20), Frame("ring_loss", "t.py", 48),
          Frame("main", "t.py", 70))
    barrier = (Frame("barrier", "torch/distributed/distributed_c10d.py", 40), Frame("main", "t.py", 81))
    for stacks, sure in (({0: [dp] * 2, 1: [barrier] * 2, 2: [cp] * 2, 3: [barrier] * 2}, "low"),
                         ({0: [dp] * 2, 1: [barrier] * 2, 2: [dp] * 2, 3: [barrier] * 2}, "medium")):
        found = collection(stacks, world=4)
        found.source_blocks = {**blocks, ("t.py", 70): blocks[("t.py", 72)]}
        for record in found.records:
            object.__setattr__(record.identity, "gpu", False)
        v = diagnose(found)
        assert (v.suspects[0].ranks, v.suspects[0].confidence) == ([1, 3], sure), v.suspects[0].reason


def test_a_process_numbered_beyond_the_world_size_is_never_a_confident_suspect():
    # torchrun says 3 ranks; a child rank 0 forked (os.fork: its parent's program, no parent pid in py-spy's text)
    # is read as a fourth process, numbered 3, stuck in a socket read (fco_fork_upload_*): at most low, after the rest
    recv = (Frame("recv", "socket.py", 0), Frame("upload", "t.py", 40), Frame("main", "t.py", 20))
    waitpid = (Frame("main", "t.py", 30),)
    backward = (Frame("backward", "torch/autograd/__init__.py", 5), Frame("main", "t.py", 31))
    stacks = {0: [waitpid] * 2, 1: [backward] * 2, 2: [backward] * 2, 3: [recv] * 2}
    v = diagnose(collection(stacks, world=3))
    assert all(s.confidence == "low" for s in v.suspects if 3 in s.ranks)
    assert v.suspects[-1].ranks == [3] and "beyond the world size 3" in v.suspects[-1].reason


def test_a_pipeline_schedules_forward_and_backward_receives_are_two_places():
    # torch.distributed.pipelining's 1F1B: one function, _step_microbatches, waits on batched P2P work in both
    # phases; the source line of each call (read by the collector) says which. Stage 0 waits for gradients from
    # stage 1 (backward) while stage 1 waits for activations from stage 0 (forward): two places, never "every rank
    # in one call", and the graph reads the phases in their order.
    schedules = "torch/distributed/pipelining/schedules.py"

    def stack(line):
        return (Frame("wait", "torch/distributed/distributed_c10d.py", 5), Frame("_wait_batch_p2p", schedules, 680),
                Frame("Schedule1F1B._step_microbatches", schedules, line), *frames("train_step", "main"))

    source = {(schedules, 1105): '_wait_batch_p2p(_batch_p2p(fwd_sends + bwd_recvs, desc="fwd_send_bwd_recv"))',
              (schedules, 1067): '_wait_batch_p2p(_batch_p2p(fwd_recvs, desc="fwd_recv"))'}
    c = collection({0: [stack(1105)] * 2, 1: [stack(1067)] * 2}, dims=ParallelDims(pp=2), world=2)
    c.source_lines = source
    v = diagnose(c)
    assert sorted(p.position.rsplit(" in ", 1)[-1] for p in v.places) == ["_step_microbatches:1067",
                                                                            "_step_microbatches:1105"]
    assert not any("the collective itself is stuck" in h for h in v.hints)
    nodes = {tuple(n.ranks): (n.schedule, n.phase) for n in v.graph.nodes}
    assert nodes == {(0,): ("torch pipelining", 2), (1,): ("torch pipelining", 1)}
    assert v.suspects[0].ranks == [1] and v.causes[0].rule == "schedule"


def test_a_specific_call_row_inside_a_library_region_names_only_the_ranks_it_waits_for():
    # Megatron's finalize_model_grads all-reduces the tied embeddings' gradients between the first and the last
    # stage only. Stage 0 waits in that all-reduce (the wait table's region covers all of megatron/core/
    # distributed/, whose catch-all row says "data-parallel group"); stages 1-3 wait in the next step's
    # recv_forward. The specific row inside the region must win over the catch-all, and of the three ranks in
    # recv_forward only the last stage is the one that never entered the all-reduce.
    fmg, p2p = "megatron/core/distributed/finalize_model_grads.py", "megatron/core/pipeline_parallel/p2p_communication.py"
    schedule = Frame("forward_backward_pipelining_without_interleaving", "megatron/core/pipeline_parallel/schedules.py", 9)
    embed = (Frame("all_reduce", "torch/distributed/distributed_c10d.py", 20),
             Frame("_allreduce_word_embedding_grads", fmg, 20), Frame("finalize_model_grads", fmg, 31), schedule,
             *frames("train_step", "main"))
    recv = (Frame("recv", "torch/distributed/distributed_c10d.py", 40), Frame("recv_forward", p2p, 34), schedule,
            *frames("train_step", "main"))
    v = diagnose(collection({0: [embed] * 2, 1: [recv] * 2, 2: [recv] * 2, 3: [recv] * 2}, dims=ParallelDims(pp=4),
                            world=4))
    stage0 = next(n for n in v.graph.nodes if n.ranks == [0])
    assert stage0.phase_says.startswith("the all-reduce of the tied embeddings' gradients")
    assert [c.ranks for c in v.causes] == [[3]] and v.causes[0].rule == "schedule"
    assert (v.suspects[0].ranks, v.suspects[0].confidence) == ([3], "medium")
    assert v.suspects[0].reason.startswith("never entered the all-reduce of the tied embeddings' gradients")
    rest = next(s for s in v.suspects if s.ranks == [1, 2])
    assert rest.confidence == "low"


def test_a_receive_inside_activation_recomputation_is_the_repeat_not_its_peer():
    # Rank 1's receive sits in a checkpointed block: backward re-runs its forward and receives a second time what
    # rank 0 sent once; rank 0's backward waits to receive the gradient rank 1 never gets to send. Both wait in a
    # recv for the other (a cycle): the side inside the recomputation issued the extra call. When both sides are
    # inside a recomputation (a tensor-parallel all-reduce re-run on every rank), it says nothing.
    c10d, ckpt = "torch/distributed/distributed_c10d.py", "torch/utils/checkpoint.py"
    backward = (Frame("_engine_run_backward", "torch/autograd/graph.py", 979), *frames("backward", "main"))
    plain = (Frame("recv", c10d, 40), Frame("StateSend.backward", "t.py", 36), *backward)
    again = (Frame("recv", c10d, 40), Frame("StateRecv.forward", "t.py", 45), Frame("Chunk.block", "t.py", 63),
             Frame("_checkpoint_without_reentrant_generator.<locals>.recompute_fn", ckpt, 1688),
             Frame("_checkpoint_hook.__init__.<locals>.unpack_hook", ckpt, 1183), *backward)
    v = diagnose(collection({0: [plain] * 2, 1: [again] * 2}, world=2))
    assert [(c.ranks, c.rule) for c in v.causes] == [([1], "recompute")]
    assert (v.suspects[0].ranks, v.suspects[0].confidence) == ([1], "medium")
    both = diagnose(collection({0: [again] * 2, 1: [again[:1] + again[2:]] * 2}, world=2))
    assert all(c.rule != "recompute" for c in both.causes)


def test_a_rank_whose_main_thread_waits_for_its_own_thread_waits_for_what_that_thread_waits_for():
    # Every rank's main thread joins its checkpoint thread. On ranks 0-1 that thread waits in a barrier; on rank 2
    # it is still writing its shard (a file I/O line). The main threads alone say "three local waits, nobody waits
    # for anybody"; through their threads, ranks 0-1 wait for rank 2, the one cause.
    join = (Frame("Thread.join", "threading.py", 1119), *frames("save_checkpoint", "main"))
    barrier = (Frame("barrier", "torch/distributed/distributed_c10d.py", 30), *frames("write_shard", "run"))
    writing = frames("write_shard", "run")
    records = []
    for rank, worker in ((0, barrier), (1, barrier), (2, writing)):
        samples = [Sample(index=i, time=float(i), status=OK, threads=(
            ThreadStack(100 + rank, "MainThread", join), ThreadStack(200 + rank, "ckpt-writer", worker)))
            for i in range(2)]
        records.append(RankRecord(RankIdentity(rank=rank, host="n0", pid=100 + rank), samples))
    c = Collection(records=records, world_size=3, samples=2)
    c.source_lines = {("t.py", 1): "f.write(shard)"}
    v = diagnose(c)
    assert [view.helper[0] for view in (v.views[0], v.views[1])] == ["ckpt-writer"] * 2 and v.views[2].helper is None
    assert [c.ranks for c in v.causes] == [[2]] and v.suspects[0].ranks == [2]
    assert any("another thread ('ckpt-writer') waits in barrier" in h for h in v.hints)


def _locals_dump(values_per_rank: list[dict]) -> str:
    """py-spy --locals text of ranks that all wait at one line of run_worker, each with its own locals."""
    out = []
    for rank, values in enumerate(values_per_rank):
        shown = "".join(f"            {name}: {value}\n" for name, value in values.items())
        out.append(f"Process {200 + rank}: python -u hang.py --rank {rank}\nPython v3.11.7 (/usr/bin/python3.11)\n\n"
                   f'Thread {200 + rank} (idle): "MainThread"\n    synchronize (torch/cuda/__init__.py:16)\n'
                   f"    run_worker (hang.py:28)\n        Arguments:\n            rank: {rank}\n        Locals:\n"
                   f"{shown}    <module> (hang.py:33)\n")
    return "\n".join(out)


def test_one_rank_whose_size_differs_where_every_rank_waits_alike_is_named_low(tmp_path):
    """odd_locals.py: the same call made with another size (our own text, the shape of pytorch/pytorch#97191)."""
    path = tmp_path / "trace-node1.out"
    path.write_text(_locals_dump([{"numel": 200, "pid_seen": 7}, {"numel": 100, "pid_seen": 8},
                                  {"numel": 100, "pid_seen": 9}, {"numel": 100, "pid_seen": 10}]))
    [first, *_] = diagnose(load_paths([path], TopologyFlags())).suspects
    assert (first.ranks, first.kind, first.confidence) == ([0], "odd-locals", "low")
    assert "`numel` in run_worker (line 28) is 200 where ranks 1-3 hold 100" in first.reason
    # what differs by design (a rank's own number, pids), or an oddity on two ranks, sets nobody apart
    path.write_text(_locals_dump([{"numel": 200, "device_index": 0}, {"numel": 100, "device_index": 1},
                                  {"numel": 100, "device_index": 1}, {"numel": 300, "device_index": 1}]))
    assert not any(s.kind == "odd-locals" for s in diagnose(load_paths([path], TopologyFlags())).suspects)
    path.write_text(_locals_dump([{"numel": 100}, {"numel": 100, "chunks": 3}, {"numel": 100}, {"numel": 100}]))
    assert not any(s.kind == "odd-locals" for s in diagnose(load_paths([path], TopologyFlags())).suspects)


def test_a_gathers_root_in_the_locals_is_not_the_only_rank_its_members_wait_for(tmp_path):
    # Ranks 0 and 2 in gather_object (dst=0: the root collects, and gather_object runs an all_gather of the whole
    # group first), rank 1 alone in an all_reduce (our own text, the shape of the fcr_dcp_stateful_raise_goes_on
    # case). Read as "rank 2 waits for rank 0 only", ranks 0,2 waited for nobody outside them: a sink, medium.
    out = []
    for rank in range(3):
        if rank == 1:
            frames = "    all_reduce (torch/distributed/distributed_c10d.py:3252)\n    main (job.py:50)\n"
        else:
            frames = ("    all_gather (torch/distributed/distributed_c10d.py:4287)\n"
                      "    gather_object (torch/distributed/distributed_c10d.py:3631)\n"
                      "        Arguments:\n            obj: <dict at 0x7f>\n            dst: 0\n"
                      "    main (job.py:56)\n")
        out.append(f"Process {300 + rank}: python job.py --rank {rank}\nPython v3.11.7 (/usr/bin/python3.11)\n\n"
                   f'Thread {300 + rank} (idle): "MainThread"\n{frames}    <module> (job.py:63)\n')
    path = tmp_path / "trace-n1.out"
    path.write_text("\n".join(out))
    v = diagnose(load_paths([path], TopologyFlags()))
    assert v.views[2].peer is not None and (v.views[2].peer.value, v.views[2].peer.root) == (0, True)
    assert v.suspects[0].ranks == [1]
    assert not any(set(s.ranks) & {0, 2} and s.confidence != "low" for s in v.suspects)


def test_a_pipeline_relay_is_not_a_wrong_peer_and_a_global_dst_wins_over_a_group_position(tmp_path):
    # Stage 0 sends to stage 1 (torch's send holds dst=1; the isend under it only group_dst=1), stage 1 receives
    # from stage 0, stage 2 from stage 1: a relay that should flow (our own text, the shape of the
    # fdw_nccl_pp_send_default_group_recv_pp_group case, where the send went to another communicator). Rank 2's
    # receive from a rank that is itself receiving is no wrong peer: rank 1 waits to pass on what rank 2 waits for.
    def dump(rank, frames):
        return (f"Process {400 + rank}: python pp.py --rank {rank}\nPython v3.11.7 (/usr/bin/python3.11)\n\n"
                f'Thread {400 + rank} (idle): "MainThread"\n{frames}    main (pp.py:90)\n    <module> (pp.py:99)\n')
    send = ("    isend (torch/distributed/distributed_c10d.py:2552)\n        Arguments:\n            group_dst: 1\n"
            "    send (torch/distributed/distributed_c10d.py:2627)\n        Arguments:\n            dst: 1\n"
            "            group_dst: None\n")
    def recv(src):
        return f"    recv (torch/distributed/distributed_c10d.py:2700)\n        Arguments:\n            src: {src}\n"
    path = tmp_path / "trace-n1.out"
    path.write_text("\n".join([dump(0, send), dump(1, recv(0)), dump(2, recv(1))]))
    v = diagnose(load_paths([path], TopologyFlags()))
    assert (v.views[0].peer.name, v.views[0].peer.value) == ("dst", 1)
    assert not any("wrong peer" in s.reason for s in v.suspects)
    assert not any(s.confidence in ("high", "medium") for s in v.suspects)


def test_one_rank_whose_group_or_flag_differs_where_every_rank_waits_alike_is_named_low(tmp_path):
    """odd_locals.py: the same line's collective on another process group (`group: None` on ranks 0-2, an object
    of its own on rank 3: the shape of NVIDIA/Megatron-LM#2263), objects compared without their addresses."""
    path = tmp_path / "trace-n1.out"
    group = "<torch._C._distributed_c10d.ProcessGroup at 0x7f{}>"
    path.write_text(_locals_dump([{"stats_group": "None", "use_dist_opt": "True"}] * 3
                                 + [{"stats_group": group.format("4d7b3bbc30"), "use_dist_opt": "False"}]))
    [first, *_] = diagnose(load_paths([path], TopologyFlags())).suspects
    assert (first.ranks, first.kind, first.confidence) == ([3], "odd-locals", "low")
    assert "process group" in first.reason and "`stats_group`" in " ".join(e["text"] for e in first.evidence)
    path.write_text(_locals_dump([{"stats_group": group.format(f"{r}0")} for r in range(4)]))  # one object each
    assert not any(s.kind == "odd-locals" for s in diagnose(load_paths([path], TopologyFlags())).suspects)


def test_a_rank_held_at_the_interpreters_exit_names_every_other_thread():
    # rank 2 returned from main; threading._shutdown joins its non-daemon 'metrics-uploader' (in Queue.get), so its
    # atexit barrier never runs (fex_atexit_barrier_behind_nondaemon_thread): an idle thread is what holds an exit
    case = Path(__file__).parent / "corpus" / "fex_atexit_barrier_behind_nondaemon_thread" / "attach"
    verdict = diagnose(load_paths([case], TopologyFlags()))
    first = verdict.suspects[0]
    assert (first.ranks, first.kind) == ([2], "local-wait") and "threading._shutdown joins" in first.reason
    said = [e["text"] for e in first.evidence if e["type"] == "thread" and "exiting" in e["text"]]
    assert said and "'metrics-uploader' waits in queue <- MetricsUploader._run" in said[0]


def test_an_actor_idle_in_rays_task_loop_is_blamed_low_where_the_dumps_name_no_process():
    # py-spy's --json names no process: Ray Train's controller and synchronization actor idle in the task loop
    # exactly as a worker whose task ended would (the fourth first-contact batch's Ray Train case); the text
    # dumps carry their titles and set them aside
    case = Path(__file__).parent / "corpus" / "fcg_ray_train_lightning_report_ckpt"
    untitled = diagnose(load_paths([case / "json"], TopologyFlags()))
    idle = [s for s in untitled.suspects if "task loop" in s.reason]
    assert idle and all(s.confidence == "low" for s in idle)
    assert "not a rank at all" in idle[0].reason
    titled = diagnose(load_paths([case / "text" / "s1", case / "text" / "s2"], TopologyFlags()))
    assert sum(a.role in ("launcher", "worker") for a in titled.set_aside) >= 2
    assert not any("not a rank at all" in s.reason for s in titled.suspects)


def test_a_receive_chain_whose_end_waits_for_the_receiver_in_turn_is_a_cycle_named_low_without_the_source():
    # rank 2 waits in recv(src=1); rank 1 waits in a world all_gather_object that rank 2 is not in: either rank 1
    # skipped its send or rank 2 the collective (the 36th first-contact batch's layer monitor: rank 2 did); only
    # the loops' counters, read with the source, tell which
    from tests.hangdoctor.corpus.check import run_entry
    case = Path(__file__).parent / "corpus" / "fev_pp_layer_monitor_empty_stage_gather"
    _, bare, _ = run_entry(case, {"paths": ["locals"]})
    end = next(s for s in bare["suspects"] if s["kind"] == "other-call" and s["ranks"] == [1])
    assert end["confidence"] == "low" and "in turn" in end["reason"]
    assert not any(s["confidence"] in ("high", "medium") for s in bare["suspects"])
    _, read, _ = run_entry(case, {"paths": ["locals"], "source": True})
    assert read["suspects"][0]["ranks"] == [2] and read["suspects"][0]["confidence"] == "medium"
    # the same shape where the end did skip its send: with the source, still named medium
    _, sent, _ = run_entry(Path(__file__).parent / "corpus" / "fer_pp_input_no_grad_skip_send",
                           {"paths": ["locals"], "source": True})
    assert sent["suspects"][0]["ranks"] == [1] and sent["suspects"][0]["confidence"] == "medium"


def test_an_odd_one_out_over_two_places_is_one_suspect():
    # a 2x2 DeviceMesh pipeline whose second row took stage indices for global ranks (the 38th first-contact
    # batch): rank 2 in send(dst=1), rank 3 in recv(src=0), ranks 0-1 in their dp all_reduce; the graph's cause
    # is ranks 2-3 together, and so is the suspect
    from tests.hangdoctor.corpus.check import run_entry
    _, verdict, _ = run_entry(Path(__file__).parent / "corpus" / "fez_mesh_pp_stage_index_as_global_peer",
                              {"paths": ["attach"]})
    [cause] = [c for c in verdict["wait_graph"]["causes"] if c["rule"] == "odd-one-out"]
    assert len(cause["nodes"]) == 2
    first = verdict["suspects"][0]
    assert first["ranks"] == [2, 3] and first["folded"] == "2-3"
    assert not any(s["ranks"] in ([2], [3]) for s in verdict["suspects"])


def test_a_progressing_rank_is_placed_in_the_innermost_function_all_its_samples_share():
    # a rank spinning in `while True: iter(loader)` (the infinite-iterator case) was caught once in torch's
    # is_initialized, once elsewhere: its place is the loop they share, not the frame the last sample caught
    from hangdoctor.analysis.ranks import _settled_frame
    from hangdoctor.analysis.waits import default_table
    spin = Frame("get_infinite_data_iter", "train.py", 40)
    main = Frame("main", "train.py", 90)
    first = (Frame("is_initialized", "torch/distributed/distributed_c10d.py", 1200),
             Frame("_BaseDataLoaderIter.__init__", "torch/utils/data/dataloader.py", 700), spin, main)
    second = (Frame("_BaseDataLoaderIter.__init__", "torch/utils/data/dataloader.py", 690),
              Frame("get_infinite_data_iter", "train.py", 41), main)
    # at two lines of the loop: still the loop (the last sample's line), and nothing deeper
    assert _settled_frame([first, second], default_table()) == Frame("get_infinite_data_iter", "train.py", 41)
    third = (Frame("DataLoader.__iter__", "torch/utils/data/dataloader.py", 480), spin, main)
    assert _settled_frame([first, third], default_table()) == spin
    assert _settled_frame([first, first], default_table()) is None  # stuck: the stack says where


def test_the_infinite_iterator_spin_is_named_by_its_loop():
    from tests.hangdoctor.corpus.check import run_entry
    _, verdict, _ = run_entry(Path(__file__).parent / "corpus" / "fcu_infinite_iter_empty_shard", {"paths": ["attach"]})
    assert "in get_infinite_data_iter" in verdict["suspects"][0]["reason"]


def test_a_rank_whose_own_thread_never_entered_the_call_its_peers_threads_wait_in_is_the_odd_one_out():
    # DDP with a comm hook run on a thread pool (the 39th first-contact batch): every main thread waits at the end of
    # backward; ranks 0 and 2 have their pool thread in all_reduce, rank 1's task raised and its thread is idle.
    # The helper thread is part of a rank's place, so rank 1 stands apart; numbered thread names are not
    from tests.hangdoctor.corpus.check import run_entry
    _, verdict, _ = run_entry(Path(__file__).parent / "corpus" / "ffb_ddp_comm_hook_pool_lost_exception",
                              {"paths": ["text/s1", "text/s2"]})
    first = verdict["suspects"][0]
    assert (first["ranks"], first["confidence"]) == ([1], "medium")
    assert "none of whose threads is in all_reduce" in first["reason"]
    assert any(h.startswith("ranks 0,2 sit in backward while another thread ('grad-compress_0')")
               for h in verdict["hints"])
    # ZeRO-3's autograd threads have no name (`thread 16430`): ranks in the same call keep one place
    _, zero3, _ = run_entry(Path(__file__).parent / "corpus" / "fdn_llamafactory_omni_sys_audio_zero3",
                            {"paths": ["attach"]})
    assert [s["folded"] for s in zero3["suspects"]] == ["2"]
    assert any("0-1,3" in p["folded"] and "for another thread in all_gather" in p["position"]
               for p in zero3["places"])


def test_a_dataloader_worker_stuck_in_its_work_is_said_to_wait_in_what_it_waits_in():
    # a worker writing a whole record into `gzip -dc` before reading its output (the 39th first-contact batch):
    # native frames show libc's write; the hint says the worker waits in file I/O, not only where it is
    from tests.hangdoctor.corpus.check import run_entry
    corpus = Path(__file__).parent / "corpus"
    _, gzip, _ = run_entry(corpus / "ffc_ds_loader_worker_gzip_pipe", {"paths": ["native"]})
    [hint] = [h for h in gzip["hints"] if "DataLoader workers" in h]
    assert "is in gunzip_external" in hint and "waiting in file I/O" in hint and "pipe" in hint
    _, forked, _ = run_entry(corpus / "fcj_dataloader_fork_held_lock", {"paths": ["native"]})
    assert any("DataLoader workers" in h and "waiting in lock acquire" in h for h in forked["hints"])


def test_a_lock_shared_between_processes_is_held_by_the_rank_inside_another_with_over_it():
    # rank 0 holds the spawn parent's multiprocessing Lock across a barrier that ranks 1-2, waiting to take the
    # same lock in the other branch, never reach (the 40th first-contact batch): with the source's blocks (attach)
    # rank 0 is inside `with lock:` of the same function, and is named; without them nobody is named with
    # confidence (the holder is as often a child that died or a stale lock file)
    from tests.hangdoctor.corpus.check import run_entry
    case = Path(__file__).parent / "corpus" / "ffd_spawn_stats_lock_held_across_barrier"
    _, read, _ = run_entry(case, {"paths": ["attach"]})
    first = read["suspects"][0]
    assert (first["ranks"], first["confidence"]) == ([0], "medium")
    assert "inside another `with` over the same lock" in first["reason"]
    _, bare, _ = run_entry(case, {"paths": ["text/s1", "text/s2"]})
    assert not any(s["confidence"] in ("high", "medium") for s in bare["suspects"])
    assert "may hold it" in bare["suspects"][0]["reason"]
    # a rank whose lock's holder died in the locked section: with the source, no rank is inside a `with` over it
    _, killed, _ = run_entry(Path(__file__).parent / "corpus" / "fdx_ds_semlock_killed_holder", {"paths": ["attach"]})
    assert (killed["suspects"][0]["ranks"], killed["suspects"][0]["confidence"]) == ([2], "high")
