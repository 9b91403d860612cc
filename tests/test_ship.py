"""Issue 13 part 1: the promotion rule (`checkers-zero ship`), the model card it writes, runs that continue
other runs (`loop --from RUN --take-replay`), and the shipped network in half precision."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from itertools import islice
from pathlib import Path

import numpy as np
import pytest
import torch

from selfplay.replay.random_records import random_game_record
from selfplay.replay.replay_buffer import COPIED_GAMES_ACTOR_ID, ReplayReader, ReplayWriter, check_store
from train.learner.learning import OptimConfig
from train.learner.pretrain import predict, split_metrics
from train.learner.pretrain_dataset import DatasetConfig, build_dataset, open_dataset
from train.learner.trainer import Trainer, TrainerConfig, window_size
from train.loop.driver import LoopConfig, run_initial_checkpoint
from train.shipping.lineage import LineageError, continue_run
from train.shipping.ship import ShipConfig, head_to_head, install, ship
from training_data import EXPERT_PDN, TINY
from zero.net.checkpoint import DEFAULT_CHECKPOINT, load_checkpoint, save_checkpoint, weights_sha256
from zero.net.encoding import encode_game, move_action
from zero.net.inference import Evaluator
from zero.net.network import PolicyValueNet
from zero.rules.game import Game
from zero.run.config import file_sha256, save_config, write_run_record
from zero.run.data import data_file
from zero.run.rundir import RunDir

FIRST_LINK_TEXT = "# The shipped network\n\n## Link 1: pretraining\n\nThe pretraining card.\n"


def tiny_checkpoint(path: Path, seed: int, step: int = 0) -> Path:
    torch.manual_seed(seed)
    return save_checkpoint(path, net=PolicyValueNet(TINY), net_config=TINY, step=step)


def trainer_config(**kw) -> TrainerConfig:
    base = TrainerConfig(batch_size=32, min_positions=50, window_min=300, window_fraction=0.5,
                         samples_per_position=2.0, checkpoint_every=4, device="cpu", poll_seconds=0.01,
                         optim=OptimConfig(lr=3e-3, schedule="constant"), expert_data="", database_targets=False)
    return replace(base, **kw)


def write_games(run: Path, actor: int, seeds) -> None:
    with ReplayWriter(run, actor) as writer:
        for s in seeds:
            writer.append_game(random_game_record(s, max_plies=40))


def make_run(root: Path, start: Path, trainer: TrainerConfig, seeds, steps: int, source: str = "",
             take_replay: bool = False) -> RunDir:
    """A run directory as the loop leaves it: config and record, its copy of its start, games from two actors,
    trainer state and candidates, its best network (the last candidate), its continuation when asked."""
    run = RunDir(root)
    cfg = LoopConfig(initial_checkpoint=source or str(start), take_replay=take_replay, trainer=trainer)
    if take_replay:
        continue_run(root, Path(source), trainer)
    initial = run_initial_checkpoint(root, start)
    save_config(cfg, run.config_file)
    write_run_record(run.logs, cfg, {"trainer": trainer.seed}, name="loop-1")
    write_games(root, 0, seeds[::2])
    write_games(root, 1, seeds[1::2])
    Trainer(root, trainer, initial).run(max_steps=steps)
    step, best = run.candidates()[-1]
    run.write_best(best, step, "test")
    return run


@pytest.fixture
def source_run(tmp_path) -> RunDir:
    start = tiny_checkpoint(tmp_path / "start.pt", 0)
    return make_run(tmp_path / "source", start, trainer_config(), list(range(12)), steps=9)


# ------------------------------------------------------------------------------------- continuing a run

def test_continue_run_takes_the_newest_window_and_the_trainer_state(tmp_path, source_run):
    trainer = trainer_config()
    reader = ReplayReader(source_run.root)
    committed = reader.positions_committed()
    window = window_size(trainer, committed)
    assert window < committed  # the test must show that only the newest games are taken
    source_state = load_checkpoint(source_run.trainer_state)
    new = tmp_path / "new"

    record = continue_run(new, source_run.root, trainer)

    newest = reader.newest_games(window)
    copied = list(ReplayReader(new).iter_games(positions=True))
    assert [g.pdn for g in copied] == [g.pdn for g in newest]  # the same games, oldest first
    assert sum(g.length for g in newest) >= window > sum(g.length for g in newest[1:])
    assert {g.actor_id for g in copied} == {COPIED_GAMES_ACTOR_ID}
    for a, b in zip(copied, newest):
        assert all(np.array_equal(a.rows[c], b.rows[c]) for c in ("black", "policy_visits", "result", "seed"))
    check = check_store(new)
    assert not check.problems and check.games == len(newest)
    assert record["copied"] == {"games": len(newest), "positions": sum(g.length for g in newest), "window": window,
                                "source_positions": committed}

    state = load_checkpoint(RunDir(new).trainer_state)
    assert state.step == source_state.step == 9
    assert weights_sha256(state.state_dict) == weights_sha256(source_state.state_dict)
    assert state.optimizer_state["state"].keys() == source_state.optimizer_state["state"].keys()
    drawn = source_state.extra["samples_drawn"]
    owed = max(0, int(drawn - trainer.samples_per_position * (committed - record["copied"]["positions"])))
    assert state.extra["samples_drawn"] == record["trainer_state"]["samples_drawn_here"] == owed
    # The new run's trainer goes on from the source's step with its optimizer, not from scratch.
    resumed = Trainer(new, trainer, DEFAULT_CHECKPOINT)
    assert resumed.step == 9 and resumed.samples_drawn == owed
    assert json.loads(RunDir(new).continuation_file.read_text()) == record
    # The copies are made once: a second call (a restart) finds them.
    assert continue_run(new, source_run.root, trainer) == record
    assert ReplayReader(new).total_games() == len(newest)


def test_a_copy_cut_short_goes_on_where_it_stopped(tmp_path, source_run):
    everything = trainer_config(window_min=10 ** 6, window_max=10 ** 6)
    newest = ReplayReader(source_run.root).newest_games(window_size(everything, 0))
    new = tmp_path / "new"
    with ReplayWriter(new, COPIED_GAMES_ACTOR_ID) as writer:  # what a crash after the first commit leaves
        for game in newest[:3]:
            writer.append_game(game)
    continue_run(new, source_run.root, everything)
    assert [g.pdn for g in ReplayReader(new).iter_games()] == [g.pdn for g in newest]


def test_only_a_run_with_a_trainer_state_can_be_continued(tmp_path, source_run):
    with pytest.raises(LineageError, match="not a run directory"):
        continue_run(tmp_path / "new", DEFAULT_CHECKPOINT, trainer_config())
    with pytest.raises(LineageError, match="cannot continue itself"):
        continue_run(source_run.root, source_run.root, trainer_config())
    source_run.trainer_state.unlink()
    with pytest.raises(LineageError, match="no trainer state"):
        continue_run(tmp_path / "new", source_run.root, trainer_config())
    assert not (tmp_path / "new").exists()


@pytest.mark.slow
def test_loop_from_a_run_with_its_replay_records_the_source(tmp_path, source_run):
    if data_file("openings/acf_3move_144.txt") is None:
        pytest.skip("openings/acf_3move_144.txt not found (set CHECKERS_ZERO_DATA)")
    new = tmp_path / "new"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    command = [sys.executable, "-m", "play", "loop", "--run", str(new), "--from", str(source_run.root),
               "--take-replay", "--actors", "0", "--minutes", "0.02", "--set", 'trainer.expert_data=""',
               "--set", "trainer.database_targets=false"]
    out = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    run = RunDir(new)
    config = run.config_file.read_text()
    assert f'initial_checkpoint = "{source_run.root}"' in config and "take_replay = true" in config
    record = json.loads(run.continuation_file.read_text())
    assert record["source"] == str(source_run.root.resolve()) and record["trainer_state"]["step"] == 9
    assert ReplayReader(new).total_games() == record["copied"]["games"] > 0
    best = source_run.read_best()
    assert run.initial_checkpoints()[0].read_bytes() == best.path.read_bytes()  # it starts from the source's best
    assert load_checkpoint(run.trainer_state).step >= 9
    # A resume may not change what the run took at its first start.
    resume = [word for word in command[:-4] if word != "--take-replay"]
    refused = subprocess.run(resume + ["--set", "take_replay=false"], capture_output=True, text=True, env=env,
                             timeout=120)
    assert refused.returncode == 2 and "take_replay" in refused.stderr


# --------------------------------------------------------------------------------------- the promotion rule

@pytest.fixture
def shipped(tmp_path) -> Path:
    """A stand-in for checkpoints/: a weak shipped network (random tiny weights) and its one-link card."""
    folder = tmp_path / "checkpoints"
    path = tiny_checkpoint(folder / "shipped.pt", 5)
    (folder / "README.md").write_text(FIRST_LINK_TEXT)
    return path


@pytest.fixture
def ballot(tmp_path, monkeypatch) -> str:
    """A ballot of three openings that stands in for the whole one (the rule's 288 games are minutes)."""
    from train.shipping import ship as shipping

    path = tmp_path / "ballot.txt"
    path.write_text("11-15 23-19 8-11\n9-13 22-18 10-14\n10-15 21-17 11-16\n")
    monkeypatch.setattr(shipping, "BALLOT_GAMES", 6)
    return str(path)


def test_a_candidate_that_wins_the_whole_ballot_is_shipped_and_a_loser_changes_nothing(shipped, ballot):
    # The pretrained network against random tiny weights: a candidate that wins by the rule. The two differ
    # in shape, so they meet at equal time (each on its own clock, the ballot split over two processes).
    cfg = ShipConfig(simulations=8, seconds=0.02, openings=ballot, half=True, parallel_games=6, oca_dataset="")
    strong = DEFAULT_CHECKPOINT
    outcome = ship(strong, cfg, shipped)
    assert outcome.full_ballot and len(outcome.result.games) == 6
    assert outcome.result.a == f"mcts:{strong}:t0.02"
    assert sorted(g.round for g in outcome.result.games) == [1, 2, 3, 4, 5, 6]
    assert "0.02 s a move (equal time: the networks differ in shape)" in outcome.entry
    assert "Raw policy on the OCA test split: not measured" in outcome.entry
    assert outcome.promoted and outcome.result.elo_ci95[0] > 0
    new = load_checkpoint(shipped)
    assert new.half and new.optimizer_state is None and new.parent == str(strong.resolve())
    assert all(t.dtype != torch.float16 for t in new.state_dict.values())  # loaded for inference as float32
    original = load_checkpoint(strong)
    assert all(torch.allclose(new.state_dict[k].float(), v.float(), atol=1e-2, rtol=1e-3)
               for k, v in original.state_dict.items())
    assert new.provenance["ship"]["link"] == 2
    card = (shipped.parent / "README.md").read_text()
    assert card.startswith(FIRST_LINK_TEXT.rstrip("\n"))  # the chain's first link is kept
    assert "## Link 2:" in card and file_sha256(shipped) in card and outcome.entry in card
    assert f"+{outcome.result.wins} ={outcome.result.draws} -{outcome.result.losses}" in card

    before, card_before = shipped.read_bytes(), card
    loser = tiny_checkpoint(shipped.parent.parent / "loser.pt", 6)
    outcome = ship(loser, replace(cfg, half=False), shipped)
    assert outcome.full_ballot and not outcome.promoted and "nothing shipped" in outcome.verdict()
    assert outcome.result.a == f"mcts:{loser}:t0.02"  # against the shipped 4x48 now: equal time again
    assert shipped.read_bytes() == before and (shipped.parent / "README.md").read_text() == card_before


def test_a_quick_look_never_ships_and_the_shipped_network_is_no_candidate(shipped, ballot):
    before = shipped.read_bytes()
    outcome = ship(DEFAULT_CHECKPOINT, ShipConfig(seconds=0.02, openings=ballot, games=2), shipped)
    assert len(outcome.result.games) == 2 and not outcome.full_ballot and not outcome.promoted
    assert "quick look" in outcome.verdict() and shipped.read_bytes() == before
    with pytest.raises(ValueError, match="weights of the shipped network"):
        ship(shipped, ShipConfig(openings=ballot), shipped)


def won_while(change):
    """A stand-in for the promotion match that the candidate wins (material alpha-beta against random moves,
    every game of the ballot), during which `change(candidate)` happens to the candidate's file."""
    from train.arena.match import play_match
    from selfplay.actors.actor import load_ballot
    from zero.rules.game import RulesConfig
    from zero.yardsticks.players import AlphaBetaPlayer, RandomPlayer

    def match(candidate, shipped, cfg, progress=False):
        change(getattr(candidate, "path", candidate))  # a Checkpoint, or (before) its path
        return play_match(AlphaBetaPlayer(3), RandomPlayer(0), load_ballot(cfg.openings), RulesConfig(),
                          seed=cfg.seed)

    return match


@pytest.mark.parametrize("change", ["replaced", "removed"])
def test_what_is_shipped_and_recorded_is_the_candidate_as_loaded(tmp_path, shipped, ballot, monkeypatch, capsys,
                                                                  change):
    # Before: a candidate file replaced during the match was recorded by the replacement's sha256 (hashed again
    # after the match), and one removed threw the won match away with "No such file".
    from train.shipping import ship as shipping

    candidate = tiny_checkpoint(tmp_path / "candidate.pt", 7)
    loaded_sha, loaded = file_sha256(candidate), load_checkpoint(candidate)
    replacement = tiny_checkpoint(tmp_path / "replacement.pt", 8)
    act = {"replaced": lambda path: shutil.copyfile(replacement, path), "removed": lambda path: path.unlink()}
    monkeypatch.setattr(shipping, "head_to_head", won_while(act[change]))
    outcome = ship(candidate, ShipConfig(openings=ballot, oca_dataset=""), shipped)
    assert outcome.promoted
    new = load_checkpoint(shipped)
    assert new.provenance["ship"]["candidate_sha256"] == loaded_sha
    assert weights_sha256(new.state_dict) == weights_sha256(loaded.state_dict)
    assert f"sha256 `{loaded_sha[:16]}" in (shipped.parent / "README.md").read_text()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{candidate} was replaced or removed during the match" in err, err


def test_a_short_ballot_file_never_ships_and_no_infinite_elo_is_printed(tmp_path, shipped, monkeypatch):
    # Before: `--set openings=EIGHT_OPENINGS.txt` promoted after 16 games, "Elo +inf (95 % CI +inf .. +inf)".
    from train.shipping import ship as shipping

    short = tmp_path / "eight.txt"
    short.write_text("11-15 23-19 8-11\n9-13 22-18 10-14\n10-15 21-17 11-16\n11-15 22-18 15x22\n"
                     "9-14 22-18 5-9\n11-16 22-18 16-19\n10-14 22-17 11-15\n9-13 21-17 5-9\n")
    before = shipped.read_bytes()
    monkeypatch.setattr(shipping, "head_to_head", won_while(lambda path: None))
    outcome = ship(tiny_checkpoint(tmp_path / "candidate.pt", 7), ShipConfig(openings=str(short), oca_dataset=""),
                   shipped)
    assert outcome.result.wins == len(outcome.result.games) == 16
    assert not outcome.full_ballot and not outcome.promoted and shipped.read_bytes() == before
    assert "quick look of 16 games" in outcome.verdict() and "at least 288 games" in outcome.verdict()
    printed = outcome.result.summary() + "\n" + outcome.verdict()
    assert "inf" not in printed and "Elo difference no finite estimate" in printed, printed


def test_the_card_records_the_chain_of_runs_behind_a_shipped_network(tmp_path, source_run, shipped, ballot):
    """A run that continued another: its best shipped (install, as after a won match), and the card's link
    names both runs with their settings, code versions, games and positions, the trainer steps, the parent
    networks and the match."""
    trainer = trainer_config()
    continued = make_run(tmp_path / "continued", source_run.read_best().path, trainer, list(range(100, 106)),
                         steps=4, source=str(source_run.root), take_replay=True)
    best = continued.read_best()
    (tmp_path / "expert.pdn").write_text(EXPERT_PDN)
    build_dataset(tmp_path / "expert.pdn", tmp_path / "oca", DatasetConfig(test_fraction=0.5), progress=False)
    cfg = ShipConfig(simulations=2, openings=ballot, games=2, oca_dataset=str(tmp_path / "oca"))
    result = head_to_head(load_checkpoint(best.path), load_checkpoint(shipped), cfg)
    entry = install(best.path, load_checkpoint(best.path), shipped, result, cfg)
    assert result.a == f"candidate:{best.path.stem}" and "at 2 simulations each" in entry  # one shape: equal search
    assert entry == (shipped.parent / "README.md").read_text().split(FIRST_LINK_TEXT.rstrip("\n"))[1].lstrip("\n")
    network = load_checkpoint(best.path)
    assert network.step == best.step == 12  # 9 steps in the source, then 3 more here
    assert f"trainer step {network.step}" in entry
    # Runs and files by names that mean something on another machine, never this one's absolute paths.
    assert f"### Run `{continued.root.name}`" in entry and f"### Run `{source_run.root.name}`" in entry
    assert f"- Network: `{continued.root.name}/checkpoints/{best.path.name}`" in entry
    assert str(tmp_path) not in entry
    for run in (continued, source_run):
        reader = ReplayReader(run.root)
        assert f"{reader.total_games():,} games, {reader.total_positions():,} positions" in entry
    record = json.loads(continued.continuation_file.read_text())
    assert f"took {record['copied']['games']:,} games" in entry and "trainer state at step 9" in entry
    assert entry.count("```toml") == 2 and "take_replay = true" in entry
    assert json.loads((continued.logs / "loop-1-record.json").read_text())["code_version"] in entry
    initial = continued.initial_checkpoints()[0]
    assert f"the run started from `{initial.name}` (step 8," in entry
    assert f"{len(result.games)} games of `{Path(ballot).name}` at 2 simulations" in entry
    # The raw policy on the dataset's test split, as pretraining's report measures it.
    data = open_dataset(tmp_path / "oca")
    rows = data.rows("test")
    m = split_metrics(predict(network.build_network(), data, rows, torch.device("cpu"), 64), data, rows)
    assert m["policy"]["positions"] > 0
    assert (f"- Raw policy on the OCA test split (`oca`, {m['policy']['positions']:,} positions with "
            f"a choice): top-1 {m['policy']['top1']:.1%}") in entry
    assert load_checkpoint(shipped).provenance["ship"]["oca_test"]["value_ce"] == pytest.approx(m["value"]["ce"])


def test_a_directory_at_a_shipped_networks_run_path_that_is_another_run_is_not_described(tmp_path, source_run,
                                                                                            shipped, ballot):
    """A network trained elsewhere (a lent GPU machine) records its run's path; a different run found at that
    path here is not its run, and the card must not describe it as one."""
    best = source_run.read_best()
    network = load_checkpoint(best.path)
    assert network.provenance["run_id"] == source_run.identity()
    stale = tmp_path / "stale"  # same path, another run: a fresh run directory put where the source was
    source_run.root.rename(stale)
    other = make_run(source_run.root, tiny_checkpoint(tmp_path / "other-start.pt", 5), trainer_config(),
                     list(range(200, 204)), steps=4)
    assert other.identity() != network.provenance["run_id"]
    cfg = ShipConfig(simulations=2, openings=ballot, games=2, oca_dataset="")
    result = head_to_head(load_checkpoint(stale / "checkpoints" / best.path.name), load_checkpoint(shipped), cfg)
    entry = install(stale / "checkpoints" / best.path.name, network, shipped, result, cfg)
    assert "### Run" not in entry and "Parent networks" not in entry
    assert f"- Run: `{source_run.root.name}`, not on this machine" in entry
    assert RunDir(stale).made(network.provenance) and not other.made(network.provenance)


# ------------------------------------------------------------------------------------------ half precision

def choice_positions():
    """Positions with a choice, from the OCA test split when the data is there (else from random play)."""
    from train.learner.pretrain_dataset import split_of
    from zero.corpus.pdn import PdnGame, read_pdn

    games = []
    pdn = data_file("OCA_2.0.pdn")
    if pdn is not None:
        for g in islice(read_pdn(pdn), 1000):
            if isinstance(g, PdnGame) and g.moves and split_of(
                    f"{g.start}\n{' '.join(str(m) for m in g.moves)}", DatasetConfig()) == 2:
                games.append((g.start, g.moves))
    else:
        rng = np.random.default_rng(0)
        for _ in range(40):
            game = Game()
            while game.outcome is None and game.ply < 80:
                game.play(game.legal_moves()[int(rng.integers(len(game.legal_moves())))])
            games.append((Game().position, game.moves))
    planes, legal = [], []
    for start, moves in games:
        game = Game(start=start)
        for move in moves:
            if len(game.legal_moves()) > 1:
                planes.append(encode_game(game))
                legal.append(sorted({move_action(m, game.position.black_to_move) for m in game.legal_moves()}))
            game.play(move)
    return np.stack(planes), legal


def test_the_shipped_network_in_half_precision_picks_the_same_moves(tmp_path):
    full = load_checkpoint(DEFAULT_CHECKPOINT)
    half = tmp_path / "half.pt"
    save_checkpoint(half, net=full.build_network(), net_config=full.net_config, step=full.step, half=True)
    loaded = load_checkpoint(half)
    assert loaded.half and all(t.dtype in (torch.float32, torch.int64) for t in loaded.state_dict.values())
    weights = sum(t.numel() * t.element_size() for t in full.state_dict.values())
    assert half.stat().st_size < 0.6 * weights

    planes, legal = choice_positions()
    assert len(legal) > 1000
    # Both in float32 arithmetic: what is compared is the storage (each int8 model would add its own rounding).
    logits32, wdl32 = Evaluator.from_checkpoint(DEFAULT_CHECKPOINT, "cpu", precision="float32").evaluate(planes)
    logits16, wdl16 = Evaluator.from_checkpoint(half, "cpu", precision="float32").evaluate(planes)
    differ, clear = 0, 0
    for i, actions in enumerate(legal):
        a, b = logits32[i, actions], logits16[i, actions]
        top2 = np.sort(a)[-2:]
        same = np.argmax(a) == np.argmax(b)
        # float16 moves a logit by less than 0.01 here (0.006 at most on the OCA test positions): a
        # preference clearer than that is kept.
        if top2[1] - top2[0] > 0.02:
            clear += 1
            assert same, f"position {i}: {a} in float32, {b} in float16"
        differ += not same
    assert clear > 0.95 * len(legal) and differ <= 0.001 * len(legal)
    assert np.abs(wdl32 - wdl16).max() < 0.01


def test_the_ship_command_reports_a_quick_look_and_leaves_the_shipped_network(tmp_path, ballot, capsys):
    from play.cli.main import main

    before = DEFAULT_CHECKPOINT.read_bytes()
    candidate = tiny_checkpoint(tmp_path / "candidate.pt", 3)
    assert main(["ship", str(candidate), "--games", "2", "--simulations", "2", "--set", f"openings={json.dumps(ballot)}"]) == 1
    assert "quick look of 2 games" in capsys.readouterr().out
    assert DEFAULT_CHECKPOINT.read_bytes() == before
    assert main(["ship", str(tmp_path / "absent.pt")]) == 2
    assert "no such checkpoint" in capsys.readouterr().err


def test_the_card_names_what_a_pretrained_or_distilled_network_was_made_from():
    from train.shipping.ship import _pretraining, card_path
    from zero.run.data import REPOSITORY

    pretrained = {"dataset": "runs/oca", "source": "OCA_2.0.pdn", "source_sha256": "77d9ad9d2aa5bdce0000",
                  "code_version": "abc", "command": "checkers-zero pretrain train --data runs/oca --out a.pt"}
    line = _pretraining(pretrained)
    assert "pretrained on `runs/oca` (from `OCA_2.0.pdn`, sha256 `77d9ad9d2aa5bdce…`)" in line
    assert "--out a.pt" in line and "{" not in line  # a sentence, not the provenance dumped
    distilled = {**pretrained, "teacher": "checkpoints/shipped.pt", "teacher_sha256": "5af5ca29d5863bc70000",
                 "teacher_positions": 100000}
    assert ("distilled from `checkpoints/shipped.pt` (sha256 `5af5ca29d5863bc7…`)" in _pretraining(distilled)
            and "100,000 positions of the teacher's own games" in _pretraining(distilled))
    assert _pretraining({"kind": "hand-made"}).startswith("- Run: none recorded")
    # Inside the repository a path is written from its root; elsewhere from the run directory it lies in.
    assert card_path(str(REPOSITORY / "runs" / "link13" / "checkpoints" / "c.pt")) == "runs/link13/checkpoints/c.pt"
    assert card_path("/elsewhere/gpu/link13/checkpoints/c.pt") == "link13/checkpoints/c.pt"
    assert card_path("/elsewhere/gpu/link13") == "link13" and card_path("runs/oca") == "runs/oca"
