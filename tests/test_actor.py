"""Self-play actors: real games with a tiny network into a real zarr replay store, checkpoint switching,
resignation bookkeeping, and clean stops on signals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from counting import Counting
from processes import interrupt, reaped, wait_until
from selfplay.actors.actor import Actor, SelfPlayConfig, current_best
from selfplay.replay.replay_buffer import ReplayReader
from selfplay.tree_search.search import SearchConfig
from zero.corpus.pdn import read_pdn_text
from zero.net.checkpoint import save_checkpoint
from zero.net.encoding import move_action
from zero.net.network import NetworkConfig, PolicyValueNet
from zero.rules.game import Game, RulesConfig
from zero.rules.notation import resolve_move

TINY = NetworkConfig(blocks=1, channels=8, policy_channels=2, value_channels=1, value_hidden=16)


def _checkpoint(run: Path, name: str, step: int, seed: int) -> Path:
    torch.manual_seed(seed)
    return save_checkpoint(run / "checkpoints" / f"{name}.pt", net=PolicyValueNet(TINY), net_config=TINY, step=step)


def _promote(run: Path, path: Path, step: int) -> None:
    # The record train.arena.gating writes.
    (run / "checkpoints" / "best.json").write_text(json.dumps({"path": str(path), "name": path.stem, "step": step}))


def _config(**choices) -> SelfPlayConfig:
    settings = dict(full_simulations=12, fast_simulations=4, full_search_prob=0.5, temperature_plies=6)
    settings.update(choices)
    return SelfPlayConfig(games_in_flight=3, checkpoint_poll_seconds=0.0, rules=RulesConfig(max_plies=40),
                          **settings)


def _games(run: Path):
    return list(ReplayReader(run).iter_games(positions=True))


@pytest.fixture
def run(tmp_path: Path) -> Path:
    _promote(tmp_path, _checkpoint(tmp_path, "first", 10, seed=0), 10)
    return tmp_path


@pytest.mark.parametrize("policy_target,root_search", [("visits", "puct"), ("improved", "puct"),
                                                      ("improved", "gumbel")])
def test_actor_games_are_whole_and_consistent(run, policy_target, root_search):
    stats = Actor(run, 3, _config(policy_target=policy_target, root_search=root_search), games=5).run()
    games = _games(run)
    assert stats.games == len(games) == 5
    assert sum(g.length for g in games) == stats.positions
    assert len({g.seed for g in games}) == 5
    for stored in games:
        assert stored.actor_id == 3 and stored.checkpoint == "first" and stored.model_version == 10
        (pdn,) = list(read_pdn_text(stored.pdn))
        assert pdn.plies == stored.length
        rows = stored.rows
        positions = pdn.positions()[:-1]
        # Every row is the position the PDN game reached at that ply, and its target covers legal actions.
        assert rows["black"].tolist() == [p.black for p in positions]
        assert rows["black_to_move"].tolist() == [p.black_to_move for p in positions]
        assert rows["ply"].tolist() == list(range(stored.length))
        for k, pos in enumerate(positions):
            legal = {move_action(m, pos.black_to_move) for m in pos.legal_moves()}
            used = rows["policy_actions"][k] >= 0
            assert set(rows["policy_actions"][k][used].tolist()) <= legal
            if policy_target == "improved" and not rows["forced"][k]:
                # The network's belief keeps every legal move in the target, visited or not.
                assert set(rows["policy_actions"][k][used].tolist()) == legal
            assert rows["policy_visits"][k][used].sum() == pytest.approx(1.0, abs=1e-5)
            assert rows["forced"][k] == (len(pos.legal_moves()) == 1)
            assert not (rows["forced"][k] and rows["full_search"][k])
        game = Game(pdn.start, moves=pdn.moves)
        if stored.termination == "max-length":
            assert stored.length == 40 and stored.winner == 0
        elif stored.termination == "resignation":
            # The side to move gave up (its search proved, or judged, the game lost).
            assert game.outcome is None and stored.winner == (-1 if game.position.black_to_move else 1)
        else:
            assert game.outcome is not None and game.outcome.winner == stored.winner
    full = np.concatenate([g.positions.full_search for g in games])
    assert 0.2 < full.mean() < 0.8  # playout-cap randomization at p = 0.5


def test_an_actor_remembers_network_answers_and_plays_the_same_games(tmp_path: Path):
    # One leaf a call: a remembered leaf is expanded at once, as the network's answer would expand it in its
    # own call, so the games are the ones an actor without the table plays, with fewer positions asked.
    asked, games = {}, {}
    for cache in (0, 4096):
        run = tmp_path / f"cache{cache}"
        _promote(run, _checkpoint(run, "first", 10, seed=0), 10)
        config = _config(cache_positions=cache, full_simulations=40, fast_simulations=16,
                         search=SearchConfig(leaves_per_tree=1))
        actor = Actor(run, 3, config, games=4)
        load_network = actor.load_evaluator
        network = []
        actor.load_evaluator = lambda info: network.append(Counting(load_network(info))) or network[-1]
        actor.run()
        asked[cache] = network[0].positions
        games[cache] = [(g.pdn, g.rows["policy_visits"].tolist()) for g in _games(run)]
    assert games[4096] == games[0] and len(games[0]) == 4
    assert asked[4096] < asked[0]


def test_actor_switches_to_a_new_best_between_games(run):
    second = _checkpoint(run, "second", 20, seed=1)
    loaded = []

    def promote_after_first_game(stats):
        if stats.games == 1:
            _promote(run, second, 20)

    actor = Actor(run, 0, _config(), games=6, progress=promote_after_first_game)
    load_network = actor.load_evaluator
    actor.load_evaluator = lambda info: loaded.append(info.name) or load_network(info)
    actor.run()
    assert loaded == ["first", "second"]
    names = [(g.checkpoint, g.model_version) for g in sorted(_games(run), key=lambda g: g.index)]
    assert names[0] == ("first", 10) and names[-1] == ("second", 20)
    # The games that were in flight when the new best appeared finished with the old network, and only
    # those: at most games_in_flight games used the first checkpoint.
    assert sum(n == "first" for n, _ in names) <= 3
    assert current_best(run).path == second


def test_an_actor_on_the_newest_network_follows_the_trainers_candidates_not_the_best(run):
    loaded = []

    def candidate_after_first_game(stats):
        if stats.games == 1 and len(loaded) == 1:
            _checkpoint(run, "candidate-0000030", 30, seed=2)

    actor = Actor(run, 0, _config(network="newest"), games=6, progress=candidate_after_first_game)
    load_network = actor.load_evaluator
    actor.load_evaluator = lambda info: loaded.append((info.name, info.step)) or load_network(info)
    actor.run()
    # Before the trainer's first candidate the best plays; then the candidate, though it was never promoted.
    assert loaded == [("first", 10), ("candidate-0000030", 30)]
    assert current_best(run).name == "first"
    steps = [g.model_version for g in sorted(_games(run), key=lambda g: g.index)]
    assert steps[0] == 10 and steps[-1] == 30


def test_resignation_and_play_through(run):
    # A threshold above 1 means every position is "lost": resign at the first chance, or record it.
    Actor(run, 0, _config(resign_threshold=1.5, resign_min_ply=4, resign_playthrough=0.0), games=3).run()
    resigned = _games(run)
    assert {g.termination for g in resigned} == {"resignation"}
    for g in resigned:
        # The side to move at the resignation ply lost; no row for the position it resigned in.
        assert g.length >= 4 and g.winner == (-1 if g.length % 2 == 0 else 1)

    Actor(run, 1, _config(resign_threshold=1.5, resign_min_ply=4, resign_playthrough=1.0), games=3).run()
    played_on = [g for g in _games(run) if g.actor_id == 1]
    assert all(g.termination != "resignation" for g in played_on)
    assert all(g.would_resign_ply >= 4 and g.would_resign_side == (1 if g.would_resign_ply % 2 == 0 else -1)
               for g in played_on)


def test_openings_from_a_ballot(run):
    ballot = run / "ballot.txt"
    ballot.write_text("9-13 21-17 5-9\n11-15 23-19 8-11\n")
    config = _config()
    config.openings, config.opening_share = str(ballot), 1.0
    Actor(run, 0, config, games=4).run()
    for stored in _games(run):
        assert stored.opening in ("9-13 21-17 5-9", "11-15 23-19 8-11")
        (pdn,) = list(read_pdn_text(stored.pdn))
        start = Game()
        for text in stored.opening.split():
            start.play(resolve_move(text, start.legal_moves()))
        # The self-play game begins after the ballot moves (they are not training positions).
        assert pdn.start == start.position
        assert stored.positions.ply[0] == 0 and stored.positions.black[0] == start.position.black


def test_seeds_continue_after_a_restart(run):
    Actor(run, 0, _config(), games=2).run()
    Actor(run, 0, _config(), games=2).run()
    assert len({g.seed for g in _games(run)}) == 4


def test_no_game_is_replayed_after_a_stop_that_discards_games_in_flight(run):
    # Games are committed in the order they finish. Stop once a later-started game has been committed
    # while an earlier one is still in flight: the restarted actor must not reissue the committed game's
    # seed (the same seed and network replay the same game, a duplicate in the store).
    def stop_when_out_of_order(stats):
        indices = [g.seed_index for g in ReplayReader(run).iter_games()] if stats.games else []
        if indices and max(indices) + 1 > len(indices):
            actor.stop.mode = "discard"

    for _ in range(4):
        actor = Actor(run, 0, _config(), games=None, progress=stop_when_out_of_order)
        actor.config.commit_positions = 1
        actor.run()
    games = _games(run)
    assert len({g.seed for g in games}) == len(games)
    assert len({tuple(g.positions.black) for g in games}) == len(games)
    assert max(g.seed_index for g in games) + 1 > len(games), "the stop never came with games out of order"


def _one_game_committed(run: Path) -> bool:
    return (run / "replay.zarr").exists() and ReplayReader(run).total_games() >= 1


@pytest.fixture
def restore_signals():
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


@pytest.mark.parametrize("signals,finished_in_flight", [((signal.SIGINT,), True),
                                                        ((signal.SIGINT, signal.SIGINT), False),
                                                        ((signal.SIGTERM,), False)])
def test_signals_finish_or_discard_the_games_in_flight(run, restore_signals, signals, finished_in_flight):
    sent = []

    def interrupt_after_first_game(stats):
        if stats.games == 1 and not sent:
            for sig in signals:
                os.kill(os.getpid(), sig)
            sent.append(stats.games)

    actor = Actor(run, 0, _config(), games=None, progress=interrupt_after_first_game)
    actor.stop.install()
    stats = actor.run()
    games = _games(run)
    assert len(games) == stats.games
    # Three games were in flight when the signal came: one had just ended, two were still being played.
    if finished_in_flight:
        assert stats.games == 3 and stats.discarded_games == 0
    else:
        assert stats.games == 1 and stats.discarded_games == 2


@pytest.mark.slow
@pytest.mark.parametrize("stop", ["finish", "discard"])
def test_ctrl_c_stops_the_selfplay_command_cleanly(run, stop):
    cmd = [sys.executable, "-m", "play", "selfplay", "--run", str(run), "--actors", "1",
           "--set", "games_in_flight=4", "--set", "rules.max_plies=60", "--set", "commit_positions=1",
           "--set", "full_simulations=8", "--set", "fast_simulations=4"]
    with reaped(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)) as proc:
        wait_until(lambda: _one_game_committed(run), 60, proc, "a committed game")
        signals = [signal.SIGINT] * (2 if stop == "discard" else 1)
        output = interrupt(proc, *signals)
    assert proc.returncode == 130, output
    assert "finishing the games in flight" in output
    games = _games(run)
    summary = next(line for line in output.splitlines() if " games, " in line and "positions in" in line)
    assert summary.startswith(f"{len(games)} games")
    for stored in games:
        assert len(stored.positions.ply) == stored.length
        (pdn,) = list(read_pdn_text(stored.pdn))
        assert pdn.plies == stored.length
    if stop == "discard":
        assert "discarding the games in flight" in output


@pytest.mark.slow
def test_actor_process_stops_on_sigterm(run):
    # The loop's supervisor stops children with SIGTERM: in-flight games are dropped, the rest committed.
    code = (f"from selfplay.actors.actor import run_actor, SelfPlayConfig; "
            f"run_actor({str(run)!r}, 5, SelfPlayConfig(games_in_flight=2, commit_positions=1, "
            f"full_simulations=8, fast_simulations=4))")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    with reaped(proc):
        wait_until(lambda: _one_game_committed(run), 60, proc, "a committed game")
        output = interrupt(proc, signal.SIGTERM, timeout=30)
    assert proc.returncode == 0, output
    assert all(len(g.positions.ply) == g.length for g in _games(run))



def _damaged_chunk_outside_the_window(run: Path) -> Path:
    """A store of 8 committed games whose oldest rows' chunk is cut to 10 bytes: no writer reads it again."""
    from selfplay.replay.random_records import random_game_record
    from selfplay.replay.replay_buffer import ReplayWriter
    from zero.run.rundir import RunDir

    with ReplayWriter(run, 0, commit_positions=1, chunk_rows=64) as writer:
        for seed in range(8):
            writer.append_game(random_game_record(seed, max_plies=40))
    chunk = RunDir(run).replay_store / "actors" / "0" / "positions" / "black" / "c" / "0"
    chunk.write_bytes(chunk.read_bytes()[:10])
    return chunk


def test_selfplay_refuses_a_damaged_replay_store_in_one_line(run, capsys):
    # Before: a committed chunk that no writer reads again went unnoticed, and the actors wrote on.
    from play.cli.main import main
    from zero.run.rundir import RunDir

    damaged = _damaged_chunk_outside_the_window(run)
    store = {p: p.read_bytes() for p in RunDir(run).replay_store.rglob("*") if p.is_file()}
    capsys.readouterr()
    assert main(["selfplay", "--run", str(run), "--actors", "1", "--games", "1", "--set", "full_simulations=8",
                 "--set", "fast_simulations=4", "--set", "rules.max_plies=40"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{damaged}: " in err and f"checkers-zero replay check --run {run}" in err
    assert {p: p.read_bytes() for p in RunDir(run).replay_store.rglob("*") if p.is_file()} == store

def test_selfplay_on_actor_ids_in_use_is_refused_in_one_line(run, capsys):
    # Before: each actor process ended in a ReplayError traceback and the command left its run record behind.
    from play.cli.main import main
    from zero.run.rundir import RunDir

    files = set(run.rglob("*"))
    held = RunDir(run).take_replay_lock(1)  # as a running loop's actor 1 holds it
    try:
        assert main(["selfplay", "--run", str(run), "--actors", "2", "--games", "1"]) == 2
    finally:
        held.close()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "another process is writing replay actor 1" in err and "--first-actor" in err
    assert set(run.rglob("*")) - files <= {RunDir(run).replay_locks, RunDir(run).replay_lock(0),
                                           RunDir(run).replay_lock(1)}
