"""First-contact batch fdk (nineteenth first-contact round, part B): live cases from public programs and reports
(see each case.json), and one shape case."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

# Run config read by rank 0 and sent with broadcast_object_list; its vocabulary object re-reads a node-local file
# when unpickled, missing on rank 2's node: the error is caught, rank 2 goes on with the defaults (no periodic
# evaluation), 3 ranks: ranks 0 and 1 wait in step 3's evaluation all_reduce (metrics group), rank 2 in step 4's
# gradient all_reduce.
register(LiveCase("fdk_bcast_config_unpickle_fallback", torchrun(3, "fdk_bcast_config_unpickle_fallback.py"),
                  ranks=3, settle=2.0))

# DDP trainer that preprocesses each rank's shard with a child script through subprocess.Popen(stdout=PIPE) and
# proc.wait() (the Python docs' Popen.wait deadlock; localstack/localstack#1101), 3 ranks: rank 1's dirty shard
# makes the child fill the pipe and block in write; rank 1 waits in proc.wait(), ranks 0 and 2 in epoch 1's first
# DDP gradient all_reduce.
register(LiveCase("fdk_popen_pipe_wait_preprocess", torchrun(3, "fdk_popen_pipe_wait_preprocess.py"), ranks=3,
                  settle=2.0))

# DDP trainer extracting each epoch's features with multiprocessing.Pool.map; a custom exception with two
# constructor arguments raised on a corrupt sample cannot be unpickled in the parent's result-handler thread
# (python/cpython#79492, #103061), 3 ranks: rank 1 waits in Pool.map for ever (two idle pool workers alive); ranks
# 0 and 2 wait in epoch 1's first DDP gradient all_reduce.
register(LiveCase("fdk_pool_exception_unpickle", torchrun(3, "fdk_pool_exception_unpickle.py"), ranks=3,
                  settle=2.0))

# Distributed RL learner (DDP policy) with a per-rank multiprocess vector env (SubprocVecEnv-style Pipes;
# chainer/chainerrl#389), 3 ranks, 2 env workers each: rank 2's env worker catches a failed env.step, logs it and
# waits for the next command without replying; rank 2 waits in the vector env's recv(), ranks 0 and 1 in update
# 1's DDP gradient all_reduce.
register(LiveCase("fdk_vecenv_worker_swallowed_step", torchrun(3, "fdk_vecenv_worker_swallowed_step.py"), ranks=3,
                  settle=2.0))
