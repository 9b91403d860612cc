"""Full and read-only disks, for real: each command stops with one line naming the file it could not write,
exits non-zero and leaves nothing half-written (issue 25, item 7)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from disks import files_below, fill, read_only, small_disk
from selfplay.replay.random_records import random_game_record
from selfplay.replay.reanalysis_store import ReanalysisWriter
from selfplay.replay.replay_buffer import ReplayWriter
from test_loop import tiny_loop
from zero.corpus.pdn import PdnGame, read_pdn_text
from zero.net.checkpoint import load_checkpoint
from zero.run.config import TEMP_MARK, disk_problem
from zero.run.data import data_file
from zero.run.rundir import RUN_ID_FILE, RunDir


def checkers_zero(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "play", *args], capture_output=True, text=True, timeout=timeout)


def assert_one_line_error(done: subprocess.CompletedProcess, words: str) -> None:
    out = done.stdout + done.stderr
    assert done.returncode != 0, out
    assert "Traceback" not in out, out
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and words in errors[0], out


def no_temp_files(root: Path) -> bool:
    return not [p for p in root.rglob(f"*{TEMP_MARK}*")]


@pytest.mark.slow
def test_a_loop_stops_on_a_full_disk_in_one_line_and_a_read_only_one_refuses_to_resume(tmp_path):
    _, config = tiny_loop(tmp_path)
    with small_disk(tmp_path / "disk", 1024) as disk:
        run = disk / "run"
        done = checkers_zero("loop", "--run", str(run), "--config", str(config), "--minutes", "4")
        out = done.stdout + done.stderr
        assert done.returncode == 1, out
        assert "Traceback" not in out, out
        # Whichever process met the full disk first (an actor, the trainer, the loop itself writing its
        # status) says so in one line naming the file, not with the end of a traceback.
        reasons = [line for line in out.splitlines() if "No space left on device" in line]
        assert reasons and all(f"cannot write {run}" in line for line in reasons), out
        assert all("No space left on device" in line for line in out.splitlines() if "exited with code" in line), out
        assert no_temp_files(run)
        checked = checkers_zero("replay", "check", "--run", str(run))
        assert checked.returncode == 0, checked.stdout + checked.stderr
        for path in (run / "checkpoints").glob("*.pt"):
            load_checkpoint(path)

        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        before = files_below(run)
        done = checkers_zero("loop", "--run", str(run), "--config", str(config), "--minutes", "1")
        assert_one_line_error(done, "Read-only file system")
        assert files_below(run) == before


def test_a_match_journal_and_a_generation_gate_journal_name_themselves_on_a_full_disk(tmp_path):
    # Before: the gatekeeper met the full disk appending a calibration game to its match journal and said
    # "cannot write: No space left on device", naming no file (the full-disk loop test above, now and then).
    from train.arena.gating import MatchJournal
    from train.arena.generation_gate import _append_round
    from train.arena.match import MatchGame, MatchResult
    from zero.corpus.openings import Opening
    from zero.rules.game import Outcome, Termination

    game = MatchGame(1, Opening("start", ()), "a", "b", (), Outcome(0, Termination.MAX_LENGTH), 0)
    result = MatchResult("a", "b", [game], [True], [0])
    with small_disk(tmp_path / "disk", 64) as disk:
        fill(disk)
        journal = disk / "matches" / "m.jsonl"
        for append in (lambda: MatchJournal(journal, "a", "b").append(game, result),
                       lambda: _append_round(journal, 0, [1.0] * 10_000)):
            with pytest.raises(OSError) as raised:
                append()
            assert disk_problem(raised.value) == f"cannot write {journal}: No space left on device"


def test_a_role_that_left_an_empty_log_on_a_full_disk_is_reported_with_the_disk(tmp_path):
    # Before: "gatekeeper exited with code 3 ...; failed for good", no reason: its log, on the full disk, was empty.
    from train.loop.supervisor import log_tail_text

    with small_disk(tmp_path / "disk", 64) as disk:
        log = disk / "gatekeeper.log"
        log.touch()
        fill(disk)
        assert log_tail_text(str(log)) == f"; its log is empty: cannot write {log}: No space left on device"
    empty = tmp_path / "empty.log"
    empty.touch()
    assert log_tail_text(str(empty)) == ""  # with room: a note in the log, and nothing to quote


def test_the_run_files_written_outside_atomic_writes_name_themselves_on_a_full_disk(tmp_path):
    # Opening a file on a full tmpfs succeeds and the write fails when it is flushed, as the file closes: an
    # OSError that names no file, which the loop's roles reported as "cannot write: No space left on device".
    with small_disk(tmp_path / "disk", 64) as disk:
        run = RunDir(disk / "run")
        run.root.mkdir()
        fill(disk)
        for write, name in ((run.identity, RUN_ID_FILE), (run.take_loop_lock, run.loop_lock_file.name)):
            with pytest.raises(OSError) as raised:
                write()
            assert disk_problem(raised.value) == f"cannot write {run.root / name}: No space left on device"
        assert sorted(p.name for p in run.root.iterdir()) == [run.loop_lock_file.name]  # no temporary left
        # The loop that could not write its name holds no lock: once there is room, the run can be taken.
        (disk / "filler").unlink()
        run.take_loop_lock().close()


def test_the_replay_stores_writers_name_their_group_on_a_full_disk(tmp_path):
    with small_disk(tmp_path / "disk", 1024) as disk:
        run = disk / "run"
        replay = ReplayWriter(run, 0, commit_positions=10**6)
        reanalysis = ReanalysisWriter(run, 0, commit_targets=10**6)
        replay.append_game(random_game_record(1))
        reanalysis.append(0, 0, np.array([3]), np.array([1.0]), 0.5, model_version=1)
        fill(disk)
        for writer in (replay, reanalysis):
            with pytest.raises(OSError) as raised:
                writer.close()  # commits what is queued
            assert disk_problem(raised.value) == f"cannot write {writer.group_dir}: No space left on device"
        with pytest.raises(OSError) as raised:
            ReplayWriter(run, 1)  # a new actor's group and columns
        new_group = RunDir(run).replay_store / "actors" / "1"
        assert disk_problem(raised.value) == f"cannot write {new_group}: No space left on device"


def test_an_endgame_database_build_on_a_full_disk_stops_in_one_line_and_resumes(tmp_path):
    with small_disk(tmp_path / "disk", 64) as disk:
        out = disk / "egdb"
        done = checkers_zero("egdb", "build", "--pieces", "3", "--out", str(out), "--no-progress")
        assert_one_line_error(done, "No space left on device")
        assert "cannot write" in done.stderr and str(out) in done.stderr
        assert no_temp_files(out)
        kept = files_below(out)
        assert any(name.endswith(".egdb") for name in kept)
    # Finished slices are whole: the build resumes from them elsewhere and probes agree with a fresh build.
    resumed = tmp_path / "resumed"
    resumed.mkdir()
    for name, data in kept.items():
        (resumed / name).write_bytes(data)
    fresh = tmp_path / "fresh"
    for where in (resumed, fresh):
        assert checkers_zero("egdb", "build", "--pieces", "3", "--out", str(where), "--no-progress").returncode == 0
    assert files_below(resumed) == files_below(fresh)


def test_a_read_only_disk_is_named_in_one_line(tmp_path):
    place = tmp_path / "ro"
    place.mkdir()
    with read_only(place):
        done = checkers_zero("egdb", "build", "--pieces", "2", "--out", str(place / "egdb"), "--no-progress")
        assert_one_line_error(done, "Read-only file system")
        assert list(place.iterdir()) == []



def ballot() -> Path:
    path = data_file("openings/acf_3move_144.txt")
    if path is None:
        pytest.skip("openings/acf_3move_144.txt not found (set CHECKERS_ZERO_DATA)")
    return path


def test_a_match_onto_a_read_only_disk_stops_before_playing(tmp_path):
    place = tmp_path / "ro"
    place.mkdir()
    with read_only(place):
        done = checkers_zero("match", "random", "alphabeta:1", "--openings", str(ballot()), "--games", "2",
                             "--out", str(place / "m.pdn"), "--no-endgame-judge")
        assert_one_line_error(done, "Read-only file system")
        assert str(place / "m.pdn") in done.stderr
        assert list(place.iterdir()) == []


def test_a_match_onto_a_full_disk_keeps_every_game_it_wrote_whole(tmp_path):
    with small_disk(tmp_path / "disk", 64) as disk:
        fill(disk, leave=4096)
        out = disk / "m.pdn"
        done = checkers_zero("match", "random", "alphabeta:1", "--openings", str(ballot()), "--games", "40",
                             "--out", str(out), "--no-endgame-judge", "--parallel", "4")
        assert_one_line_error(done, "No space left on device")
        assert no_temp_files(disk)
        games = read_pdn_text(out.read_text())
        assert games and all(isinstance(g, PdnGame) and g.result in ("1-0", "0-1", "1/2-1/2") for g in games), games
