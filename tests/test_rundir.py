"""The run directory's layout: the best-network pointer, candidates, status files, and a run as a network."""

from __future__ import annotations

import json

import pytest

from zero.net.checkpoint import DEFAULT_CHECKPOINT, CheckpointError, resolve_checkpoint
from zero.run.rundir import RunDir, RunDirError


def test_best_pointer_round_trip_and_relative_paths(tmp_path):
    run = RunDir(tmp_path)
    assert run.read_best() is None
    target = run.candidate(40)
    target.parent.mkdir(parents=True)
    target.write_bytes(b"x")
    written = run.write_best(target, 40, "test")
    assert run.read_best() == written and written.path == target.resolve() and written.name == "candidate-0000040"
    # A record written by hand with a path relative to the run directory means the same file.
    run.best_file.write_text(json.dumps({"path": "checkpoints/candidate-0000040.pt", "step": 40}))
    assert run.read_best().path == target.resolve()


def test_a_damaged_best_pointer_is_a_clear_error(tmp_path):
    run = RunDir(tmp_path)
    run.best_file.parent.mkdir(parents=True)
    run.best_file.write_text("{not json")
    with pytest.raises(RunDirError, match="best.json"):
        run.read_best()
    with pytest.raises(CheckpointError, match="best.json"):
        resolve_checkpoint(tmp_path)


def test_candidates_are_listed_oldest_first(tmp_path):
    run = RunDir(tmp_path)
    run.checkpoints.mkdir(parents=True)
    for step in (200, 20, 1000):
        run.candidate(step).write_bytes(b"")
    (run.checkpoints / "candidate-latest.pt").write_bytes(b"")  # not a candidate name: ignored
    assert [step for step, _ in run.candidates()] == [20, 200, 1000]


def test_status_files(tmp_path):
    run = RunDir(tmp_path)
    assert run.read_status("trainer") is None
    run.write_status("trainer", {"step": 3})
    assert run.read_status("trainer") == {"step": 3}


def test_resolve_checkpoint(tmp_path):
    assert resolve_checkpoint(None) == DEFAULT_CHECKPOINT and resolve_checkpoint("") == DEFAULT_CHECKPOINT
    with pytest.raises(CheckpointError, match="not a run with a best network"):
        resolve_checkpoint(tmp_path)
    with pytest.raises(CheckpointError, match="no such checkpoint file or run directory"):
        resolve_checkpoint(tmp_path / "missing.pt")
    RunDir(tmp_path).write_best(DEFAULT_CHECKPOINT, 0, "test")
    assert resolve_checkpoint(tmp_path) == DEFAULT_CHECKPOINT.resolve()


def test_one_loop_owns_a_run_and_a_dead_ones_lock_does_not_block(tmp_path):
    import signal
    import subprocess
    import sys

    from play.cli.main import main

    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from zero.run.rundir import RunDir; "
         f"lock = RunDir({str(tmp_path)!r}).take_loop_lock(); print('held', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RunDirError, match=f"in use by another loop \\(process {holder.pid} on host"):
            RunDir(tmp_path).take_loop_lock()
        # The loop command refuses at once, before it touches the run.
        assert main(["loop", "--run", str(tmp_path), "--minutes", "0.01"]) == 2
        assert not RunDir(tmp_path).config_file.exists()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    RunDir(tmp_path).take_loop_lock().close()  # the kernel dropped the dead holder's lock


@pytest.mark.parametrize("tamper", ["deleted", "replaced"])
def test_the_run_stays_locked_whatever_becomes_of_loop_lock(tmp_path, tamper):
    # Before: the lock was an flock on loop.lock, so deleting or replacing that file let a second loop lock
    # the new one and run beside the first.
    held = RunDir(tmp_path).take_loop_lock()
    try:
        lock_file = RunDir(tmp_path).loop_lock_file
        lock_file.unlink()
        if tamper == "replaced":
            lock_file.write_text("nobody")
        with pytest.raises(RunDirError, match="in use by another loop"):
            RunDir(tmp_path).take_loop_lock()
    finally:
        held.close()
    RunDir(tmp_path).take_loop_lock().close()


def test_a_file_is_not_a_run_directory(tmp_path):
    path = tmp_path / "not-a-dir"
    path.write_text("x")
    with pytest.raises(RunDirError, match="is a file"):
        RunDir(path).take_loop_lock()


def test_a_run_started_from_another_runs_start_keeps_its_name(tmp_path):
    # Before: a run continued from a continued run named its best network initial-initial-shipped.
    run = RunDir(tmp_path / "run")
    assert run.initial_checkpoint("shipped").name == "initial-shipped.pt"
    assert run.initial_checkpoint("initial-shipped").name == "initial-shipped.pt"
    assert run.initial_checkpoint("candidate-0000042").name == "initial-candidate-0000042.pt"
