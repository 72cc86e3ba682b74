"""The first-contact pastes of issue 30 (tests/hangdoctor/pastes/batchN: our own reproductions of the shapes of
pastes in public threads, each named in its truth file, with the ground truth written before any verdict),
read as bench/paste_contact.py judges them: every process found, its whole stack, its role."""

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from bench.paste_contact import judge
from hangdoctor.cli import main

PASTES = Path(__file__).parent / "pastes"
KNOWN_MISSES = {
    "vllm50835_enginecore_and_rayworker": "vLLM's EngineCore (its executor waiting in collective_rpc) is read as a "
                                          "rank, as the corpus's vLLM cases have it; the paste's truth sets it aside",
    "lightning_19106_interleaved_tracebacks": "four ranks' tracebacks interleaved line by line on one stderr with no "
                                              "prefix: nothing tells the lines apart",
    "ray_30566_dashboard_pyspy_error": "py-spy's error for a process is read as that process not answering (the "
                                       "issue's rule); the paste's truth counts it as no process at all",
    "verl_7180_agentloop_threads": "an idle Ray actor (main thread in Ray's task loop) is kept as a rank: an actor "
                                   "that dropped out of its loop is a cause in the corpus; the truth sets it aside",
    "examples148_ctrlc_main_then_four_dataloader_workers_garbled": "four DataLoader workers' tracebacks interleaved "
                                                                   "line by line on one tty, with no prefix",
    "mmdet5892_tmux_pane_two_ranks_interleaved": "two ranks' tracebacks interleaved line by line in a tmux pane",
    "mmdet3959_eval_pool_workers_split_main_traceback": "the main process's traceback split in parts by the pool "
                                                        "workers' tracebacks printed in the middle of it",
    "torchrec161_handmade_arrow_chain": "a call chain written by hand in prose ('a → b → c'): no frame of any tool",
    "areal_1065_scheduler_log_traceback": "a scheduler's own traceback between its log lines is read as a rank",
    "lmeval_2839_rank0_spawn_children": "three spawned children's tracebacks behind the parent's [rank0]: prefix are "
                                        "read as the rank, the parent's own traceback among them",
    "neox_1306_interleaved_two_ranks": "two ranks' tracebacks interleaved line by line with no prefix",
    "sdscripts_725_rich_traceback_box": "a rich traceback box whose function names are cut at its right border",
    "pyflame_dump_three_threads": "pyflame's own dump format (file:function:line frames under bare thread ids) is not "
                                  "read",
    "paleomix_6_gdb_pyframe_macro_frames": "a gdb session walking Python 2.7's PyEval_EvalFrameEx frames with a "
                                           "gdbinit macro (file and function as quoted C strings, the line as "
                                           "`$k = N`): no frame shape of any tool this reads",
    "underworld3_630_hang_report_rollcall_four_ranks": "a hand-made roll call ('ranks [0, 2, 3] stopped at f.py:N in "
                                                       "fn', 'via' lines): frames inside a person's sentences",
    "lmcache_4759_two_host_collector_banners_pid_headers_pyspy": "a collection script's host banners and pid headers over py-spy's thread lines: processes and hosts not split as the script meant",  # seventh paste batch, at first contact
    "nvidia_blog_gdb_thread_apply_all_bt_python_frames_inside_evalframe_args": "gdb's thread apply all bt with Python frames only inside _PyEval_EvalFrameDefault's arguments: no frame shape this reads",  # seventh paste batch, at first contact
    "pytorch54818_process_timed_out_faulthandler_listener_is_current": "torch's MultiProcessTestCase line 'Process 3 timed out with traceback:' names the rank of the faulthandler dump after it; the faulthandler reader takes no rank from a line before a dump",  # ninth paste batch, at first contact
    "skillspool_sglang_hang_skill_flat_elided_pyspy_excerpt": "an illustrative excerpt with its indentation flattened, a thread header without an id and frames without a line number among prose lines: too little of any dump's shape to read",  # ninth paste batch, at first contact
    "lilbee594_windows_ci_hang_watchdog_pyspy_native_errors_every_worker_no_frames": "py-spy's 'Failed to find python version' for every worker and no frame: read as processes that did not answer (exit 1), where the truth says a paste with no stack (one Error line)",  # tenth paste batch, at first contact
    "marin5345_iris_threaddump_pyspy_subprocesses_partial_stdout_then_stderr_error": "py-spy's error for an unnamed non-Python child under a '--- stderr ---' heading is read as a second process that did not answer",  # tenth paste batch, at first contact
    "sglang10216_c10_frames_then_fatal_aborted_watchdog_thread_and_spawned_scheduler": "the [rank3]: watchdog lines name the rank, but the faulthandler dump after them carries no prefix: its process gets no rank",  # tenth paste batch, at first contact
    "verl1691_quoted_ansi_ray_prefix_with_ip_c10_frames_fatal_aborted_current_last": "Ray's '(WorkerDict pid=N, ip=...)' prefix with colour codes left on some lines after the quote marks: the actor's rank (sglang's scheduler_TP1) is not read",  # tenth paste batch, at first contact
    "dap_skill_page_pause_transcript_single_stopped_at_location_line": "a debugger's transcript in a how-to page: one stop location ('Stopped at process() · worker.py:55') among commands and arrows, no dump of any tool",  # eleventh paste batch, at first contact
    "miaai117_torchfrtrace_summary_arrow_chain_innermost_first_elided_rank1": "one rank's stack written by hand as an arrow chain in a sentence (a Flight Recorder summary's entry, its middle cut): frames inside prose",  # eleventh paste batch, at first contact
    "pytorch24927_gdb_thread_switch_py_bt_pin_thread_only_wrapped_locals": "a gdb session that switches to the pin-memory thread and prints its py-bt only: the truth says the work thread is not shown, the reader takes the one thread it has as the process's",  # twelfth paste batch, at first contact
    "pytorch4679_shell_session_ctrl_c_mp_launcher_join_then_atexit": "a shell session whose Ctrl-C traceback of a multiprocessing launcher's join follows a good run's output and an atexit traceback: read as two ranks, where the paste holds one launcher",  # twelfth paste batch, at first contact
    "stepcodex_vllm_glm_dsa_page_elided_tracebacks_rpc_timeout_and_cause": "a vLLM chained traceback whose cause, printed first, holds the wait (dequeue, acquire_read): the reader takes the later traceback's frames",  # twelfth paste batch, at first contact
    "so1408356_question_indented_code_pool_workers_keyboardinterrupt_tracebacks": "a Stack Overflow question's 4-space indented blocks: Python 2.6 pool workers' KeyboardInterrupt tracebacks ('Process PoolWorker-N:') read as one worker set aside, where the paste holds four",  # thirteenth paste batch, at first contact
    "transformers17478_rank_tagged_log_lines_then_barrier_detail_traceback": "log lines name 'rank 6' in words (a Trainer message) before an untagged traceback: the traceback's process gets no rank",  # thirteenth paste batch, at first contact
    "sglang22607_comment_two_trimmed_stacks_tp0_and_grouped_tp1_3_first_line_flush": "two headerless py-spy fragments each labelled by a sentence before it ('TP0 stuck forever in:', 'while TP1-3 ... waiting in:'): read as one stack of one process; the labels in prose are not read",  # fourteenth paste batch, at first contact
    "xla5524_ctrl_c_pjrt_spawn_parent_traceback_then_two_spawnprocess_tracebacks": "xmp.spawn's parent traceback then two 'Process SpawnProcess-N:' tracebacks: the parent is read as the rank and the two children set aside, the reverse of the truth",  # thirteenth paste batch, at first contact
}


def cases():
    for paste in sorted(PASTES.glob("*/*.txt")):
        marks = [pytest.mark.xfail(reason=KNOWN_MISSES[paste.stem], strict=True)] if paste.stem in KNOWN_MISSES else []
        yield pytest.param(paste, id=f"{paste.parent.name}/{paste.stem}", marks=marks)


@pytest.mark.parametrize("paste", list(cases()))
def test_the_paste_is_read_rightly(paste):
    truth = json.loads(paste.with_suffix(".truth.json").read_text())
    out, err = io.StringIO(), io.StringIO()
    code = main(["analyze", str(paste), "--json", *truth.get("args", [])],
                out=Console(file=out, width=200), err=Console(file=err, width=400))
    try:
        verdict = json.loads(out.getvalue())
    except ValueError:
        verdict = {}
    wrong = judge(verdict, code, err.getvalue(), truth)
    assert not wrong, wrong
