"""End to end: the real loop command on a tiny network, SIGKILLed at random moments, then resumed.

Invariants after each kill and resume: replay counts never go down and committed games stay intact, every
checkpoint loads, the trainer never goes back, the ratings file is consistent, and the best checkpoint is
either the run's start or a candidate promoted by a recorded gating match.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from processes import interrupt, reaped, wait_until
from training_data import negative_variances
from selfplay.replay.reanalysis_store import FreshTargets
from selfplay.replay.replay_buffer import ReplayReader, check_store, split_game_id
from train.arena.gating import Gatekeeper, read_gating_log
from train.loop.supervisor import below_the_loop
from train.arena.ratings import RatingsTable
from zero.corpus.pdn import PdnGame, read_pdn_text
from zero.net.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from zero.net.network import NetworkConfig, PolicyValueNet
from zero.run.data import data_file
from zero.run.rundir import RunDir

pytestmark = pytest.mark.slow

TINY_CONFIG = """
initial_checkpoint = "{initial}"
status_seconds = 3.0
[selfplay]
games_in_flight = 8
commit_positions = 32
commit_seconds = 1.0
niceness = 2
full_simulations = 8
fast_simulations = 4
[selfplay.search]
tree_capacity = 1024
[selfplay.rules]
max_plies = 60
[trainer]
expert_data = ""
batch_size = 16
min_positions = 60
window_min = 100
checkpoint_every = 8
samples_per_position = 16.0
poll_seconds = 0.3
[gating]
simulations = 4
parallel_games = 8
rating_games = 2
rating_yardsticks = ["alphabeta:2"]
calibration_games = 2
niceness = 3
[gating.sprt]
max_pairs = 2
"""


TINY_NET = NetworkConfig(blocks=1, channels=8, policy_channels=2, value_channels=1, value_hidden=8)


def tiny_loop(folder: Path) -> tuple[Path, Path]:
    """A tiny network to start a run from, and the TOML settings of a fast loop on it."""
    if data_file("openings/acf_3move_144.txt") is None:
        pytest.skip("openings/acf_3move_144.txt not found (set CHECKERS_ZERO_DATA)")
    torch.manual_seed(0)
    initial = folder / "tiny.pt"
    save_checkpoint(initial, net=PolicyValueNet(TINY_NET), net_config=TINY_NET, step=0)
    config = folder / "tiny.toml"
    config.write_text(TINY_CONFIG.format(initial=initial))
    return initial, config


def children_of(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(x) for x in out.split()]


def start_loop(run: Path, config: Path, *args: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.Popen(
        [sys.executable, "-m", "play", "loop", "--run", str(run), "--config", str(config), *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True,
    )


def trainer_step(run: Path) -> int:
    state = run / "checkpoints" / "trainer-state.pt"
    return load_checkpoint(state).step if state.exists() else 0


def committed_games(run: Path) -> dict[int, str]:
    reader = ReplayReader(run)
    games = {}
    for g in reader.iter_games(positions=True):
        assert len(g.positions.ply) == g.length
        games[g.game_id] = g.pdn
    return games


def check_invariants(run: Path, initial: Path, before: dict[int, str]) -> dict[int, str]:
    games = committed_games(run)
    # Nothing committed is lost or changed.
    assert set(before) <= set(games)
    assert all(games[k] == v for k, v in before.items())
    parsed = [g for text in games.values() for g in read_pdn_text(text)]
    assert all(isinstance(g, PdnGame) for g in parsed), [g for g in parsed if not isinstance(g, PdnGame)]
    for path in (run / "checkpoints").glob("*.pt"):
        try:
            load_checkpoint(path)
        except CheckpointError:
            if path.exists():  # else the gatekeeper removed a candidate it was done with since the listing
                raise
    assert not check_store(run).problems
    table = RatingsTable.load(run / "ratings.json") if (run / "ratings.json").exists() else RatingsTable()
    for key in table.results:
        a, b = key.split("|")
        assert a in table.players and b in table.players
    table.fit()
    best = RunDir(run).read_best()
    assert best is not None
    if best.path != initial.resolve():
        promoted = [e for e in read_gating_log(run) if e["decision"] == "promote" and e["candidate"] == str(best.path)]
        assert promoted, f"best {best.path} has no recorded promotion"
        assert Path(promoted[-1]["pdn"]).exists()
    return games


def test_loop_survives_sigkill_and_resumes(tmp_path):
    initial, config = tiny_loop(tmp_path)
    run = tmp_path / "run"
    run_copy = run / "checkpoints" / "initial-tiny.pt"  # the run's own copy of its starting checkpoint
    rng = random.Random(os.getpid())

    with reaped(start_loop(run, config)) as proc:
        wait_until(lambda: ReplayReader(run).total_games() >= 3, 240, proc, "three committed games")
        # Kill one child at a random moment: the supervisor restarts it.
        time.sleep(rng.uniform(0, 5))
        victims = children_of(proc.pid)
        assert victims
        os.kill(rng.choice(victims), signal.SIGKILL)
        before = check_invariants(run, run_copy, {})
        step_before = trainer_step(run)
        wait_until(lambda: trainer_step(run) > step_before and len(committed_games(run)) > len(before), 240, proc,
                   "training and self-play to go on after the kill")
        # Now kill everything at once, as a power cut would.
        time.sleep(rng.uniform(0, 3))
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    time.sleep(1.5)  # orphaned children notice their parent is gone within a second and stop
    before = check_invariants(run, run_copy, before)
    step_before = trainer_step(run)
    decided_before = len(read_gating_log(run))
    # Replacing the file the run started from must not change the run: it works from its copy.
    copied = run_copy.read_bytes()
    assert copied == initial.read_bytes()
    save_checkpoint(initial, net=PolicyValueNet(TINY_NET), net_config=TINY_NET, step=123)

    with reaped(start_loop(run, config)) as proc:
        wait_until(lambda: len(committed_games(run)) > len(before) and trainer_step(run) > step_before, 240, proc,
                   "training and self-play to go on after the resume")
        wait_until(lambda: len(read_gating_log(run)) > decided_before, 240, proc, "a gating decision")
        out = interrupt(proc, signal.SIGINT, timeout=120)
    assert proc.returncode == 0, out
    assert "resuming run" in out and "the trainer goes on from step" in out, out
    # Every decision of this session is on the console, not only in logs/gatekeeper.log (skipped candidates
    # that came together folded into one line).
    for line in Gatekeeper.decision_lines(read_gating_log(run)[decided_before:]):
        assert line in out, out
    check_invariants(run, run_copy, before)
    assert run_copy.read_bytes() == copied
    assert trainer_step(run) > step_before
    config_text = (run / "loop-config.toml").read_text()
    assert "initial_checkpoint" in config_text
    records = list((run / "logs").glob("loop-*-record.json"))
    assert len(records) == 2 and all("code_version" in json.loads(r.read_text()) for r in records)
    assert not children_of(proc.pid)
    # Gating yields the cores to self-play and training (gating.niceness), after every restart too, and the
    # actors yield to the trainer (selfplay.niceness); the console says at what priority each runs.
    assert f"gatekeeper running at niceness {below_the_loop(3, os.nice(0))} (gating.niceness 3" in out, out
    assert f"actor 0 running at niceness {below_the_loop(2, os.nice(0))} (selfplay.niceness 2" in out, out


def test_a_reanalyser_feeds_the_trainer_and_survives_a_kill(tmp_path):
    initial, config = tiny_loop(tmp_path)
    run = tmp_path / "run"
    settings = {"actors": 1, "reanalyse.workers": 1, "reanalyse.simulations": 8, "reanalyse.games_in_flight": 8,
                "reanalyse.commit_targets": 16, "reanalyse.network_poll_seconds": 2}
    overrides = [arg for key, value in settings.items() for arg in ("--set", f"{key}={value}")]

    def reanalysed_in_training() -> bool:
        return (RunDir(run).read_status("trainer") or {}).get("reanalysed_share", 0) > 0

    with reaped(start_loop(run, config, *overrides)) as proc:
        wait_until(lambda: len(FreshTargets(run)) >= 32, 300, proc, "the reanalyser to commit targets")
        started = re.search(r"reanalyser 0 \(pid (\d+)\)", (run / "logs" / "reanalyser-0.log").read_text())
        os.kill(int(started.group(1)), signal.SIGKILL)
        committed = check_store(run).targets
        wait_until(lambda: check_store(run).targets > committed + 16, 300, proc,
                   "reanalysis to go on after the kill")
        wait_until(reanalysed_in_training, 300, proc, "the trainer to train on reanalysed targets")
        out = interrupt(proc, signal.SIGINT, timeout=120)
    assert proc.returncode == 0, out
    assert "and 1 reanalyser(s)" in out
    assert len(re.findall(r"reanalyser 0 \(pid \d+\)", (run / "logs" / "reanalyser-0.log").read_text())) >= 2
    check_invariants(run, run / "checkpoints" / "initial-tiny.pt", {})


@pytest.mark.parametrize("damage", ["truncated to 10 bytes", "garbage"])
def test_the_loop_refuses_what_replay_check_refuses(tmp_path, damage):
    # Before: with a committed chunk damaged outside the trainer's window, `replay check` named it and exited 1,
    # yet the loop started, committed more games and exited 0.
    from selfplay.replay.random_records import random_game_record
    from selfplay.replay.replay_buffer import ReplayWriter

    _, config = tiny_loop(tmp_path)
    run = tmp_path / "run"
    with ReplayWriter(run, 0, commit_positions=1, chunk_rows=64) as writer:
        for seed in range(8):
            writer.append_game(random_game_record(seed, max_plies=40))
    chunk = RunDir(run).replay_store / "actors" / "0" / "positions" / "black" / "c" / "0"  # the oldest rows
    size = len(chunk.read_bytes())
    chunk.write_bytes(chunk.read_bytes()[:10] if damage == "truncated to 10 bytes" else bytes(range(256))[:size])
    store = {p: p.read_bytes() for p in RunDir(run).replay_store.rglob("*") if p.is_file()}
    with reaped(start_loop(run, config, "--minutes", "0.1")) as proc:
        out = proc.communicate(timeout=120)[0]
    assert proc.returncode != 0, out
    errors = [line for line in out.splitlines() if "error" in line]
    assert len(errors) == 1 and f"{chunk}: " in errors[0], out
    assert f"checkers-zero replay check --run {run}" in errors[0] and "Traceback" not in out
    assert {p: p.read_bytes() for p in RunDir(run).replay_store.rglob("*") if p.is_file()} == store


def test_the_gpu_configuration_runs_on_the_cpu(tmp_path):
    """What a GPU user's first loop runs, all but CUDA itself: the GPU's games in flight and leaves per tree,
    two actors, the trainer's GPU batch size, and bf16 autocast in self-play and in training."""
    from selfplay.actors.actor import SelfPlayConfig
    from train.learner.trainer import TrainerConfig

    gpu_selfplay = SelfPlayConfig().sized_for(cuda=True)
    gpu_trainer = TrainerConfig().sized_for(cuda=True)
    initial, config = tiny_loop(tmp_path)
    run = tmp_path / "run"
    settings = {"actors": 2, "selfplay.games_in_flight": gpu_selfplay.games_in_flight,
                "selfplay.search.leaves_per_tree": gpu_selfplay.search.leaves_per_tree,
                "selfplay.precision": "bfloat16", "trainer.batch_size": gpu_trainer.batch_size,
                "trainer.precision": "bfloat16", "trainer.window_min": 2 * gpu_trainer.batch_size}
    overrides = [arg for key, value in settings.items() for arg in ("--set", f"{key}={value}")]
    with reaped(start_loop(run, config, *overrides)) as proc:
        wait_until(lambda: len({split_game_id(g)[0] for g in committed_games(run)}) == 2, 300, proc,
                   "both actors to commit games")
        wait_until(lambda: trainer_step(run) >= 2 and list((run / "checkpoints").glob("candidate-*.pt")), 300,
                   proc, "the trainer to write a candidate")
        out = interrupt(proc, signal.SIGINT, timeout=120)
    assert proc.returncode == 0, out
    sizing = (f"in bfloat16 (torch); {gpu_selfplay.games_in_flight} games in flight x "
              f"{gpu_selfplay.search.leaves_per_tree} leaves per tree")
    for actor in (0, 1):
        assert sizing in (run / "logs" / f"actor-{actor}.log").read_text()
    assert f"in bf16 autocast, batches of {gpu_trainer.batch_size}" in (run / "logs" / "trainer.log").read_text()
    check_invariants(run, run / "checkpoints" / "initial-tiny.pt", {})


def test_a_loop_from_a_network_that_answers_nan_stops_in_one_line(tmp_path):
    # Before: the run started, actor 0 restarted with the same traceback three times a minute while the
    # status line said the first games were being played, and the loop exited 0.
    _, config = tiny_loop(tmp_path)
    net = PolicyValueNet(TINY_NET)
    with torch.no_grad():
        negative_variances(net)
    bad = save_checkpoint(tmp_path / "bad.pt", net=net, net_config=TINY_NET, step=0)
    run = tmp_path / "run"
    with reaped(start_loop(run, config, "--from", str(bad), "--minutes", "0.2")) as proc:
        out = proc.communicate(timeout=120)[0]
    assert proc.returncode == 2
    assert out == (f"error: initial checkpoint: {bad}: the network's outputs are not finite on fixed positions "
                   f"(policy, value, plies-left), though its weights are; it cannot be used\n")
    assert not RunDir(run).best_file.exists()


def test_the_runs_clock_goes_on_across_sessions(tmp_path):
    # Before: the minute counter restarted at 0 when a run was resumed.
    from train.loop.driver import record_run_minutes, run_minutes

    assert run_minutes(tmp_path) == 0.0
    record_run_minutes(tmp_path, 0.0, time.time() - 90)  # a first session of a minute and a half
    assert run_minutes(tmp_path) == pytest.approx(1.5, abs=0.05)
    resumed = record_run_minutes(tmp_path, run_minutes(tmp_path), time.time())  # the next one, just begun
    assert resumed / 60 == pytest.approx(1.5, abs=0.05)


def test_status_line_gives_the_best_networks_rating_against_the_reference_yardstick(tmp_path):
    from train.arena.ratings import ANCHOR, REFERENCE, PlayerInfo
    from train.loop.driver import format_status, status_snapshot

    checkpoint = tmp_path / "checkpoints" / "candidate-0000400.pt"
    RunDir(tmp_path).write_best(checkpoint, 400, "test")
    table = RatingsTable()
    for name, kind in ((ANCHOR, "yardstick"), (REFERENCE, "yardstick"), (checkpoint.stem, "checkpoint")):
        table.add_player(PlayerInfo(name, kind))
    table.add_results(REFERENCE, ANCHOR, 20, 0, 0)
    table.add_results(checkpoint.stem, REFERENCE, 60, 80, 60)
    table.save(tmp_path / "ratings.json")
    line = format_status(status_snapshot(tmp_path), 90.0)
    vs = line.split(f"best {checkpoint.stem} (")[1].split(")")[0]
    elo, difference = vs.split(", ")
    assert elo.endswith(" Elo") and difference.endswith(f" vs {REFERENCE}")
    centre, half_width = difference.split()[0].split("±")
    assert abs(float(centre)) < 1 and 20 < float(half_width) < 60  # an even score over 200 games


def test_status_line_prints_no_nan_for_a_best_not_rated_yet(tmp_path):
    # Issue 76, item 11: "best initial-shipped (nan Elo)": the best had played its gates, not yet the
    # calibrated yardsticks, so it was not tied to the anchor.
    from train.arena.ratings import ANCHOR, PlayerInfo
    from train.loop.driver import format_status, status_snapshot

    best = tmp_path / "checkpoints" / "initial-shipped.pt"
    RunDir(tmp_path).write_best(best, 0, "test")
    table = RatingsTable()
    for name, kind in ((ANCHOR, "yardstick"), (best.stem, "checkpoint"), ("candidate-0000400", "checkpoint")):
        table.add_player(PlayerInfo(name, kind))
    table.add_results("candidate-0000400", best.stem, 6, 10, 4)
    table.save(tmp_path / "ratings.json")
    snap = status_snapshot(tmp_path)
    line = format_status(snap, 90.0).splitlines()[1]
    assert line == "[1.5 min] best initial-shipped (not rated yet)", line
    assert "best_elo" not in snap


def test_a_fresh_run_says_why_its_trainer_starts_at_the_networks_step():
    # Before (issue 85, item 11): "starting run R from initial-shipped.pt with 2 actor(s)", and then the
    # status said step 99,930 with nothing trained.
    from train.loop.driver import starting_line

    line = starting_line(Path("/r"), Path("/r/checkpoints/initial-shipped.pt"), 99930, 2, "")
    assert line == ("starting run /r from /r/checkpoints/initial-shipped.pt with 2 actor(s); the trainer's steps "
                    "count on from the 99,930 that network was trained for")
    assert starting_line(Path("/r"), Path("/r/n.pt"), 0, 1, "") == "starting run /r from /r/n.pt with 1 actor(s)"
