"""The distilled player's loop: generations of the alpha-beta player learning from its own bullet games, in one
resumable command (`checkers-zero distilled loop --run DIR`).

A cycle has three phases, each on the self-play loop's machinery:

1. **Self-play**: `actors` processes (train.loop.supervisor: restarted after a crash) play the run's best
   evaluation against itself at a fixed depth (selfplay.actors.alphabeta_actor) into the run's replay store
   until it holds `positions` more positions.
2. **Training**: a candidate evaluation learns the quiet positions of the newest `window` of them
   (train.learner.distilled.own_games: the search's score and the game's result blended), starting from the best's
   weights; written to checkpoints/candidate-CCCC.npz.
3. **Gate**: the candidate plays the best, SPRT on game pairs at a bullet budget, confirmed at 0.1 s a move
   (train.arena.generation_gate). Promoted, it becomes the run's best (checkpoints/best.json, its generation
   one more than the best's); the decision goes to the run's gating log either way.

Generation 0 is the evaluation the run starts from (the shipped `checkpoints/distilled.npz` unless `initial`
names another), copied into the run. Every phase's work is in the run directory, so Ctrl-C or `kill -9` at any
moment loses only what was in flight and the same command resumes: the actors go on after their last committed
game (no game is played or counted twice), a candidate already written is not trained again, a gate replays
only its unfinished round, and a decision logged but not yet applied is applied.
"""

from __future__ import annotations

import logging
import math
import shutil
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from selfplay.actors.alphabeta_actor import AlphaBetaSelfPlayConfig, run_alphabeta_actor
from selfplay.replay.replay_buffer import ReplayReader
from train.arena.gating import GatingInterrupted, append_gating_log
from train.arena.generation_gate import GATE_ENTRY, GenerationGateConfig, gate, generation_decisions
from train.learner.distilled.own_games import own_game_labels
from train.learner.distilled.training import DistilledTrainConfig, train
from train.loop.supervisor import Supervisor
from zero.run.config import MOST_PROCESSES, load_config, save_config, setting, to_dict, write_run_record
from zero.run.rundir import RunDir

log = logging.getLogger("checkers_zero.distilled_loop")


def _fine_tuning() -> DistilledTrainConfig:
    # A candidate goes on from the best's weights: fewer, smaller steps than learning from nothing, and the
    # game's result as much as the search's score.
    return DistilledTrainConfig(steps=2000, lr=5e-4, result_weight=0.5)


@dataclass
class DistilledLoopConfig:
    """Everything a distilled-player run needs; RUN/distilled-loop-config.toml on the first start, reused on
    resume (a --set on resume changes it for good and is recorded)."""

    # The evaluation generation 0 is: a file; "" = the shipped checkpoints/distilled.npz. Copied into the run.
    initial: str = ""
    # The policy-value network whose value is a prior in the first generations' targets (a checkpoint or a run
    # directory; "" = the shipped checkpoints/shipped.pt), and how many generations learn with it: its value,
    # the game's result and the search's score (training.result_weight, then training.searched_weight) while
    # the best's generation is below this, the result and the search's score alone from then on.
    teacher: str = ""
    teacher_generations: int = setting(2, low=0, high=1_000_000)
    cycles: int = setting(0, low=0, high=1_000_000)  # cycles to run (this command), 0 = until stopped
    positions: int = setting(500_000, low=1, high=1 << 40)  # self-play positions each cycle adds
    window: int = setting(2_000_000, low=1, high=1 << 40)  # the newest positions a candidate learns
    actors: int = setting(2, low=1, high=MOST_PROCESSES)  # self-play processes (one core each)
    status_seconds: float = setting(30.0, above=0)  # how often self-play prints its rate
    selfplay: AlphaBetaSelfPlayConfig = field(default_factory=AlphaBetaSelfPlayConfig)
    training: DistilledTrainConfig = field(default_factory=_fine_tuning)
    gate: GenerationGateConfig = field(default_factory=GenerationGateConfig)

    def validate(self) -> None:
        self.selfplay.validate()
        self.training.validate()
        self.gate.validate()


def resolve_config(run: RunDir, path: str | None, overrides: list[str]) -> DistilledLoopConfig:
    """The run's saved config (with overrides) when it has one, else the given file's (or the defaults)."""
    saved = run.distilled_config_file
    cfg = load_config(DistilledLoopConfig, saved if saved.exists() else path, overrides)
    cfg.validate()
    return cfg


@dataclass
class LoopState:
    """Where a run stands, read from its files."""

    cycle: int  # the cycle to run next: decisions logged so far
    best: Path
    generation: int


def loop_state(run: RunDir, cfg: DistilledLoopConfig) -> LoopState:
    """Where the run stands; on its first start generation 0 is copied in and made its best. A decision
    logged but not applied (a kill between the two) is applied here."""
    from zero.distilled.model import DEFAULT_DISTILLED, load_eval

    best = run.read_best()
    if best is None:
        source = Path(cfg.initial) if cfg.initial else DEFAULT_DISTILLED
        load_eval(source)  # refused in one line before anything is written
        initial = run.initial_evaluation()
        initial.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, initial)
        best = run.write_best(initial, 0, f"generation 0: {source}")
    decisions = generation_decisions(run.root)
    if decisions and decisions[-1]["decision"] == "promote" and best.path != Path(decisions[-1]["candidate"]):
        best = run.write_best(Path(decisions[-1]["candidate"]), decisions[-1]["generation"],
                              f"won its gate (cycle {decisions[-1]['cycle']})")
    return LoopState(len(decisions), best.path, best.step)


class Stopped(Exception):
    """Ctrl-C or SIGTERM: the loop stops where it is; the same command resumes."""


def self_play(run: RunDir, cfg: DistilledLoopConfig, state: LoopState, stopping: Callable[[], bool],
              say: Callable[[str], None]) -> None:
    """Phase 1: the actors play until the store holds (cycle + 1) x positions (each actor its share)."""
    target = math.ceil((state.cycle + 1) * cfg.positions / cfg.actors)
    supervisor = Supervisor(log_dir=str(run.logs))
    run.logs.mkdir(parents=True, exist_ok=True)
    for actor in range(cfg.actors):
        supervisor.add(f"actor-{actor}", run_alphabeta_actor, str(run.root), actor, cfg.selfplay, str(state.best),
                       state.generation, target)
    reader = ReplayReader(run.root)
    start_positions, start = reader.total_positions(), time.monotonic()
    supervisor.start_all()
    last = start
    try:
        while not supervisor.all_done():
            time.sleep(0.5)
            for event in supervisor.check():
                say(event)
            if supervisor.failed_roles():
                raise RuntimeError(f"self-play failed: {', '.join(supervisor.failed_roles())} (see {run.logs})")
            if stopping():
                raise Stopped
            if time.monotonic() - last >= cfg.status_seconds:
                last = time.monotonic()
                reader.refresh()
                made = reader.total_positions() - start_positions
                rate = made / (last - start)
                status = {"cycle": state.cycle, "generation": state.generation, "games": reader.total_games(),
                          "positions": reader.total_positions(), "target": target * cfg.actors,
                          "positions_per_hour": round(rate * 3600)}
                run.write_status("distilled-loop", status)
                say(f"cycle {state.cycle} self-play: {reader.total_positions():,} of {target * cfg.actors:,} "
                    f"positions, {reader.total_games():,} games, {rate * 3600:,.0f} positions an hour")
    finally:
        supervisor.stop_all()
    if stopping():  # Ctrl-C reaches the actors too: they finish their game and exit as if done
        raise Stopped


def check_equal_time(cfg: DistilledLoopConfig, best: Path) -> None:
    """Refuse a gate that would favour a candidate of another size: at a fixed depth the larger evaluation gets its
    cost free, so such a candidate is gated on the clock at both stages (ValueError, one line)."""
    from zero.distilled.model import load_eval

    shape, best_shape = cfg.training.shape, load_eval(best).shape
    fixed = [b for b in (cfg.gate.budget, cfg.gate.confirm_budget) if b and not b.startswith("t")]
    if shape != best_shape and fixed:
        raise ValueError(f"a {shape} candidate against a {best_shape} best is gated at equal time: "
                         f"gate budget {fixed[0]!r} is a depth; set a clock, e.g. --set gate.budget=t0+0.02")


def train_candidate(run: RunDir, cfg: DistilledLoopConfig, state: LoopState, say: Callable[[str], None]) -> Path:
    """Phase 2: the cycle's candidate, trained unless it is already written: from the best's weights, or from
    scratch when the training's shape is not the best's."""
    from zero.distilled.model import load_eval

    out = run.evaluation_candidate(state.cycle)
    if out.exists():
        return out
    from zero.net.checkpoint import resolve_checkpoint
    from zero.net.inference import Evaluator

    reader = ReplayReader(run.root)
    teacher = None
    if state.generation < cfg.teacher_generations:
        teacher = resolve_checkpoint(cfg.teacher)
    labels, searched, games = own_game_labels(
        reader, cfg.window, None if teacher is None else Evaluator.from_checkpoint(
            teacher, device="cpu", threads=cfg.training.threads))
    say(f"cycle {state.cycle} training: {len(labels['black']):,} quiet positions of {games:,} games, from "
        f"generation {state.generation}" + ("" if teacher is None else f", {Path(teacher).name}'s values a prior"))
    made_from = {"parent": state.best.name, "parent_generation": state.generation, "cycle": state.cycle,
                 "games": games, "positions": int(len(labels["black"])), "teacher": str(teacher or ""),
                 "store_positions": reader.total_positions(), "selfplay": to_dict(cfg.selfplay)}
    best = load_eval(state.best)
    same_size = best.shape == cfg.training.shape
    if not same_size:
        # Another size (item 3 of issue 84): no weights to go on from, so it learns the window from scratch.
        say(f"cycle {state.cycle} training: a {cfg.training.shape} evaluation, the best a {best.shape} one: "
            f"learnt from scratch")
    held = train(labels, cfg.training, out, made_from, progress=False, searched=searched,
                 initial=best if same_size else None)
    say(f"cycle {state.cycle} training: held out {held.positions:,} positions, loss {held.loss_vs_target:.4f} "
        f"against their targets, {held.loss_vs_teacher:.4f} against the " + ("search alone" if teacher is None else
                                                                               "teacher alone"))
    return out


def run_distilled_loop(run_dir: Path, cfg: DistilledLoopConfig, say: Callable[[str], None] = print) -> int:
    """The loop (module doc) until `cfg.cycles` cycles are done, or Ctrl-C / SIGTERM; 0 when it stops cleanly."""
    run = RunDir(run_dir)
    lock = run.take_loop_lock()
    stop = {"now": False}

    def request_stop(*_):
        if stop["now"]:  # a second Ctrl-C: at once (every file is still whole; the work in flight is lost)
            raise KeyboardInterrupt
        stop["now"] = True
        say("stopping after the work in flight (Ctrl-C again: at once)")

    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        save_config(cfg, run.distilled_config_file)
        write_run_record(run.root, cfg, {"selfplay": cfg.selfplay.seed, "training": cfg.training.seed},
                         name="distilled-loop")
        state = loop_state(run, cfg)
        say(f"{run.root}: cycle {state.cycle}, best generation {state.generation} ({state.best.name})")
        for _ in range(cfg.cycles or 1 << 62):
            check_equal_time(cfg, state.best)
            self_play(run, cfg, state, lambda: stop["now"], say)
            candidate = train_candidate(run, cfg, state, say)
            if stop["now"]:
                raise Stopped
            stages = gate(run.root, state.cycle, candidate, state.best, cfg.gate, say, lambda: stop["now"])
            decision = "promote" if all(s.decision == "promote" for s in stages) else "reject"
            entry = {"kind": GATE_ENTRY, "cycle": state.cycle, "candidate": str(candidate.resolve()),
                     "best": str(state.best), "generation": state.generation + (decision == "promote"),
                     "decision": decision, "stages": [vars(s) for s in stages], "time": time.time()}
            append_gating_log(run.root, entry)
            say(f"cycle {state.cycle} gate: {decision} ({'; '.join(s.line() for s in stages)})")
            state = loop_state(run, cfg)
            if stop["now"]:
                raise Stopped
    except (Stopped, GatingInterrupted, KeyboardInterrupt):
        say("stopped; the same command resumes the run")
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        lock.close()
    return 0
