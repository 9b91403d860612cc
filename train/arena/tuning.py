"""SPSA tuning of the search constants at the real budget: the network player on the clock against itself.

Each iteration k draws a random sign per parameter (flip), builds two players that differ only there,
`mcts[:NET]:tS:NAME=θ+c_k·flip...` and `...θ−c_k·flip...`, plays one opening of the ballot with both colours
(the openings in a seeded shuffled order, a fresh order each lap), and moves θ along flip by the score W−L of
θ+: θ ← clip(θ + R_k·c_k·(W−L)·flip). The schedules are fishtest's (server/fishtest/spsa_workflow.py),
with its parameter line `name, start, min, max, c_end, r_end`:

    c_k = c_end·(N/k)^γ                       the perturbation, shrinking to c_end at the last iteration N
    a_k = r_end·c_end²·((A+N)/(A+k))^α        the step, R_k = a_k/c_k² reaching r_end at iteration N
    A = a_fraction·N, α = 0.602, γ = 0.101

The probes θ±c_k·flip are clipped to [min, max] too, and an integer setting is rounded when it goes into a
spec (θ itself stays real, so that small steps add up).

P iterations run at once in P worker processes of one thread each (train.arena.split_match.worker_pool: what a
player on the clock measures is its own core). Iteration k probes around θ after iteration k−P (the start for
k <= P) and its update applies to θ after iteration k−1, in iteration order: P = 1 is plain SPSA, and the
trajectory is the same whenever and however often the run is stopped and resumed.

With `clock` (e.g. "0+0.1") both players play on that game clock instead of `seconds` a move, and the
table may also name the time manager's settings (selfplay.tree_search.time_manager.TimeManager: how far a move draws on
the bank, how long an unstable search thinks on); its default table then holds them too.

The output directory holds the trajectory (trajectory.jsonl: one JSON line per iteration, appended whole
and synced: its opening, flip, c_k, the values each player played, W/D/L and θ after the update), the
settings (tune-config.toml, which a restart must keep), the network it tunes for (network.json: the
checkpoint and its hash, since a run directory's best moves on) and a record of each start (starts/: settings,
code version, seeds). A restart continues after the last complete line; a last line cut short by a crash is
dropped with a message (its update never counted); any other damaged line stops the run with one line
saying where.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import os
import time
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tqdm import tqdm

from selfplay.tree_search.analysis import single_game_search
from selfplay.tree_search.search import SearchConfig
from selfplay.tree_search.time_manager import GAME_CLOCK_SETTINGS, GameClock, TimeManager
from train.arena.gating import GatingConfig
from train.arena.match import MatchResult, mix_seed
from train.arena.player_specs import TIME_MANAGER_SETTINGS, make_player
from train.arena.split_match import Share, play_share, worker_pool
from zero.run.config import (MOST_GAMES, MOST_PROCESSES, MOST_SEED, ConfigError, append_whole, atomic_write_bytes,
                             check_settings, file_sha256, load_config, save_config, setting, to_dict, with_overrides,
                             write_run_record)
from zero.corpus.openings import Opening

log = logging.getLogger(__name__)

TRAJECTORY = "trajectory.jsonl"
CONFIG = "tune-config.toml"
NETWORK = "network.json"


@dataclass
class Param:
    """One tuned search setting: fishtest's parameter line. Every key is required (nan: not given)."""

    name: str = ""  # a numeric field of SearchConfig or TimeManager (an int field is rounded in a spec)
    start: float = math.nan
    min: float = math.nan  # the range θ and both probes stay in (within what SearchConfig allows)
    max: float = math.nan
    c_end: float = setting(math.nan, above=0)  # the perturbation at the last iteration: a change worth a few Elo
    r_end: float = setting(math.nan, above=0)  # the learning rate at the last iteration (a_end = r_end·c_end²)



# The numeric settings of a player on the clock (its search's and its time manager's), and whether each is a
# whole number.
_NUMERIC = {name: typ is int for settings in (SearchConfig, TimeManager)
            for name, typ in typing.get_type_hints(settings).items() if typ in (int, float)}


def default_params(game_clock: bool = False) -> list[Param]:
    """The PUCT constants (the exploration weight and its growth, the FPU reductions, virtual loss, leaves a
    network call) and the policy temperature, each starting where a match player on the clock has it now;
    for a player on a game clock, its time manager's settings too.

    c_end is about a tenth of the range (more than 1 for an integer, so that its probes still differ when
    rounded). r_end = 0.03 suits the default 1,000 iterations (fishtest's 0.002 assumes tens of thousands of
    pairs). In a simulation of this schedule (5 parameters, 1,000 pairs, 70 % draws, each parameter costing
    1 Elo one c_end from its optimum and 4 two c_end from it), started 3·c_end off every optimum, r_end 0.01
    ended 2.0 c_end off (rms), 0.03 1.0 and 0.1 1.1; started on the optimum, 0.03 ended 0.6 off, 0.1 1.1."""
    now = single_game_search(GatingConfig().search)
    ranges = {"c_puct": (0.5, 4.0, 0.25), "c_puct_growth": (0.0, 3.0, 0.3), "fpu_reduction": (0.0, 1.0, 0.1),
              "fpu_reduction_root": (0.0, 1.0, 0.1), "virtual_loss": (0.0, 3.0, 0.3), "leaves_per_tree": (1, 64, 4),
              "policy_temperature": (0.5, 3.0, 0.2)}
    table = [Param(name, float(getattr(now, name)), float(low), float(high), float(c_end), 0.03)
             for name, (low, high, c_end) in ranges.items()]
    if not game_clock:
        return table
    manager = TimeManager()
    timing = {"rate_margin": (1.0, 4.0, 0.3), "moves_to_go": (4.0, 60.0, 4.0), "moves_a_piece": (0.5, 3.0, 0.25),
              "extension": (1.0, 6.0, 0.5), "most_of_bank": (0.05, 1.0, 0.1), "reserve": (0.0, 0.5, 0.05),
              "unstable_share": (0.0, 1.0, 0.1), "value_drop": (0.0, 0.5, 0.05)}
    return table + [Param(name, float(getattr(manager, name)), low, high, c_end, 0.03)
                    for name, (low, high, c_end) in timing.items()]


@dataclass
class TuneConfig:
    """An SPSA run (see the module doc); `checkers-zero tune --config FILE --set KEY=VALUE`.

    The table in a TOML file, replacing the default one whole:

        [[params]]
        name = "c_puct"
        start = 1.5
        min = 0.5
        max = 4.0
        c_end = 0.25
        r_end = 0.03
    """

    network: str = ""  # checkpoint file or run directory (its best network, fixed at the first start); "": shipped
    seconds: float = setting(0.1, above=0)  # time a move of both players
    clock: str = ""  # a game clock "B+I" for both players instead (B seconds, I more a move), e.g. "0+0.1"
    # N, game pairs in the whole run: the schedules reach c_end and r_end at N. About 4 hours at 0.1 s a move
    # with 2 processes (a 288-game ballot takes about 35 minutes there).
    iterations: int = setting(1000, low=1, high=MOST_GAMES)
    # Iterations at once, one core each; part of the trajectory's definition.
    processes: int = setting(2, low=1, high=MOST_PROCESSES)
    openings: str = GatingConfig.openings  # relative to the data folder, or an absolute path
    seed: int = setting(0, low=0, high=MOST_SEED)  # flips, the openings' order, and the players' seeds
    alpha: float = setting(0.602, above=0)  # how fast the step a_k decays
    gamma: float = setting(0.101, above=0)  # how fast the perturbation c_k decays
    a_fraction: float = setting(0.1, low=0)  # fishtest's A, the step's stability constant, as a share of N
    params: list[Param] = field(default_factory=default_params)

    def validate(self) -> None:
        """Refuse a bad table with a ConfigError of one line naming the parameter."""
        check_settings(self)  # a key left out of a parameter reads as nan, which this refuses
        if self.clock:
            try:
                GameClock.parse(self.clock)
            except ValueError as exc:
                raise ConfigError(f"clock = {self.clock!r}: {exc}") from None
        if not self.params:
            raise ConfigError("params: the table is empty; name at least one search setting to tune")
        names = [p.name for p in self.params]
        for i, p in enumerate(self.params):
            where = f"params[{i}] ({p.name or 'no name'})"
            if p.name not in _NUMERIC:
                raise ConfigError(f"{where}: not a numeric search or time manager setting; one of "
                                  f"{', '.join(_NUMERIC)}")
            if p.name in GAME_CLOCK_SETTINGS and not self.clock:
                raise ConfigError(f"{where}: acts only on a game clock, and the players play {self.seconds:g} s "
                                  f"a move; set clock (e.g. clock=\"0+{self.seconds:g}\") to tune it")
            if names.count(p.name) > 1:
                raise ConfigError(f"{where}: named twice in the table")
            if not p.min < p.max:
                raise ConfigError(f"{where}: min {p.min:g} must be below max {p.max:g}")
            # At a bound is allowed: fpu_reduction_root's default, 0, is the lowest value it may take.
            if not p.min <= p.start <= p.max:
                raise ConfigError(f"{where}: start {p.start:g} is outside [{p.min:g}, {p.max:g}]")
            settings = TimeManager() if p.name in TIME_MANAGER_SETTINGS else single_game_search()
            for bound in (p.min, p.max):
                if _NUMERIC[p.name] and not float(bound).is_integer():
                    raise ConfigError(f"{where}: {p.name} is a whole number, so min and max must be too")
                try:
                    with_overrides(settings, [f"{p.name}={_text(p, bound)}"])
                except ConfigError as exc:
                    raise ConfigError(f"{where}: a bound the player refuses: {exc}") from None


def load_tune_config(out: Path, config_file: str | None = None, overrides: Sequence[str] = ()) -> TuneConfig:
    """A new run's settings: defaults + file + overrides; a restarted run's: its stored settings + overrides
    (tune() refuses any change)."""
    stored = Path(out) / CONFIG
    cfg = load_config(TuneConfig, stored if stored.exists() and config_file is None else config_file,
                      list(overrides))
    if cfg.clock and cfg.params == default_params():  # the table not given: the one for a game clock
        cfg = dataclasses.replace(cfg, params=default_params(game_clock=True))
    cfg.validate()
    return cfg


# ------------------------------------------------------------------------------------------------ SPSA maths

def gains(p: Param, k: int, cfg: TuneConfig) -> tuple[float, float]:
    """(c_k, R_k) of parameter p at iteration k (1-based) of cfg.iterations: see the module doc."""
    n = cfg.iterations
    a = cfg.a_fraction * n
    c = p.c_end * (n / k) ** cfg.gamma
    step = p.r_end * p.c_end ** 2 * ((a + n) / (a + k)) ** cfg.alpha
    return c, step / c ** 2


def clip(p: Param, value: float) -> float:
    return min(max(value, p.min), p.max)


def probes(params: list[Param], theta: list[float], c: list[float], flip: list[int]) -> tuple[list, list]:
    """The values θ+ and θ− play: θ ± c·flip, clipped to each range and rounded as a spec takes them."""
    return ([played(p, clip(p, t + ck * f)) for p, t, ck, f in zip(params, theta, c, flip)],
            [played(p, clip(p, t - ck * f)) for p, t, ck, f in zip(params, theta, c, flip)])


def spsa_update(params: list[Param], theta: list[float], c: list[float], r: list[float], flip: list[int],
                result: int) -> list[float]:
    """θ moved by R·c·result·flip (result: θ+'s wins minus losses), clipped to each range."""
    return [clip(p, t + rk * ck * result * f) for p, t, ck, rk, f in zip(params, theta, c, r, flip)]


def draw_flip(seed: int, k: int, n: int) -> list[int]:
    """Iteration k's signs, one per parameter: a function of the seed and k alone, so a restart draws the same."""
    return [int(x) for x in np.random.default_rng([seed, 0, k]).choice((-1, 1), n)]


def opening_of(seed: int, k: int, count: int) -> int:
    """Iteration k's opening: the ballot in a shuffled order, reshuffled for each lap through it."""
    lap, place = divmod(k - 1, count)
    return int(np.random.default_rng([seed, 1, lap]).permutation(count)[place])


def played(p: Param, value: float) -> float | int:
    """A value as a spec carries it: an integer setting rounded, a real one to 5 significant digits."""
    return round(value) if _NUMERIC[p.name] else float(f"{value:.5g}")


def _text(p: Param, value: float) -> str:
    value = played(p, value)
    return str(value) if _NUMERIC[p.name] else f"{value:g}"


def settings_suffix(params: list[Param], values: list[float]) -> str:
    """":c_puct=1.7:fpu_reduction=0.3..." for a player spec."""
    return "".join(f":{p.name}={_text(p, v)}" for p, v in zip(params, values))


def base_spec(cfg: TuneConfig, network: str | None = None) -> str:
    """The player being tuned, without its settings (`network`: a spec's NET in place of cfg.network)."""
    net = cfg.network if network is None else network
    return f"mcts:{net + ':' if net else ''}t{cfg.clock or f'{cfg.seconds:g}'}"


# ------------------------------------------------------------------------------------------------ trajectory

class TrajectoryError(ValueError):
    """A trajectory file with a damaged line (not a torn last one) or a run whose settings changed."""


@dataclass(frozen=True)
class Step:
    """One iteration, as its trajectory line holds it (every per-parameter field keyed by name)."""

    iteration: int
    opening: str
    flip: dict[str, int]
    c: dict[str, float]
    plus: dict[str, float]  # the values θ+ played
    minus: dict[str, float]
    wins: int  # θ+'s
    draws: int
    losses: int
    theta: dict[str, float]  # after this iteration's update

    @property
    def result(self) -> int:
        return self.wins - self.losses

    def line(self) -> bytes:
        return (json.dumps({**dataclasses.asdict(self), "result": self.result}) + "\n").encode()

    @classmethod
    def from_line(cls, line: bytes, params: list[Param]) -> "Step":
        entry = json.loads(line)
        entry.pop("result", None)
        step = cls(**entry)
        names = {p.name for p in params}
        for key in ("flip", "c", "plus", "minus", "theta"):
            if set(getattr(step, key)) != names:
                raise ValueError(f"its {key} names {sorted(getattr(step, key))}, the table {sorted(names)}")
        if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in step.theta.values()):
            raise ValueError("its theta is not finite numbers")
        return step


def read_trajectory(path: Path, params: list[Param]) -> list[Step]:
    """The complete iterations of a trajectory file, in order. A last line without its newline was cut short
    by a crash (lines are appended whole, newline included): it is cut off the file with a message, since
    its update never counted. Any other line that is not the next iteration raises TrajectoryError."""
    if not path.exists():
        return []
    data = path.read_bytes()
    *lines, torn = data.split(b"\n")
    if torn:
        log.warning("%s: its last line was cut short (%d bytes without a newline, an iteration that never "
                    "finished): dropped, and that iteration is played again", path, len(torn))
        with open(path, "r+b") as fh:
            fh.truncate(len(data) - len(torn))
    steps = []
    for number, line in enumerate(lines, 1):
        try:
            step = Step.from_line(line, params)
            if step.iteration != number:
                raise ValueError(f"it holds iteration {step.iteration}")
        except (ValueError, TypeError, AttributeError) as exc:
            raise TrajectoryError(f"{path}:{number}: not iteration {number} of this run ({exc}); the run stops "
                                  f"here rather than guess (remove the lines from {number} on to go on from "
                                  f"iteration {number - 1})") from None
        steps.append(step)
    return steps


def thetas(params: list[Param], steps: list[Step]) -> list[list[float]]:
    """θ after 0, 1, ..., len(steps) iterations."""
    return [[p.start for p in params]] + [[s.theta[p.name] for p in params] for s in steps]


# ------------------------------------------------------------------------------------------------ the run

@dataclass(frozen=True)
class _Probe:
    """An iteration in flight: what it plays, before its result is known."""

    iteration: int
    opening: str
    flip: list[int]
    c: list[float]
    r: list[float]
    plus: list[float]
    minus: list[float]


def _probe(cfg: TuneConfig, k: int, theta: list[float], openings: list[Opening]) -> tuple[_Probe, Opening]:
    params = cfg.params
    flip = draw_flip(cfg.seed, k, len(params))
    c, r = zip(*(gains(p, k, cfg) for p in params))
    plus, minus = probes(params, theta, list(c), flip)
    opening = openings[opening_of(cfg.seed, k, len(openings))]
    return _Probe(k, opening.name, flip, list(c), list(r), plus, minus), opening


def _pin(out: Path, cfg: TuneConfig, checkpoint: Path) -> None:
    """Store the settings and the network on the first start; refuse a restart that changes either."""
    stored, pinned = out / CONFIG, out / NETWORK
    network = {"checkpoint": str(checkpoint), "sha256": file_sha256(checkpoint)}
    if not stored.exists():  # the network first: a run with its settings stored has its network pinned
        atomic_write_bytes(pinned, (json.dumps(network) + "\n").encode())
        save_config(cfg, stored)
    else:
        now = to_dict(cfg)
        changed = [k for k, v in to_dict(load_config(TuneConfig, stored)).items() if now.get(k) != v]
        if changed:
            raise TrajectoryError(f"{out} was started with other settings ({', '.join(changed)}: see {stored}); "
                                  f"a tuning run keeps its settings, so start a new output directory for these")
        first_network = json.loads(pinned.read_text()) if pinned.exists() else network
        if first_network["sha256"] != network["sha256"]:
            raise TrajectoryError(f"{out} tunes for {first_network['checkpoint']} (sha256 "
                                  f"{first_network['sha256'][:12]}), and the network named now is {checkpoint} "
                                  f"({network['sha256'][:12]}); start a new output directory for the new network")


def tune(cfg: TuneConfig, out: Path, play: Callable[[Share], MatchResult] | None = None,
         progress: bool = False) -> list[Step]:
    """Run (or continue) the SPSA run in `out` up to cfg.iterations and return its whole trajectory.
    `play` plays an iteration's Share in this process instead of a worker pool (tests inject cheap ones);
    CheckpointError, PlayerSpecError, BallotError, FileNotFoundError (no ballot), ConfigError or TrajectoryError
    before anything is played."""
    from selfplay.actors.actor import load_ballot
    from zero.net.checkpoint import resolve_checkpoint

    cfg.validate()
    out = Path(out)
    checkpoint = resolve_checkpoint(cfg.network)
    # The specs name the checkpoint file itself: a run directory's best may change while this runs.
    spec = base_spec(cfg, str(checkpoint))
    # A network that does not load stops here, not in a worker (and its int8 model is derived once, here).
    make_player(spec + settings_suffix(cfg.params, [p.start for p in cfg.params]))
    openings = load_ballot(cfg.openings)
    _pin(out, cfg, checkpoint)
    steps = read_trajectory(out / TRAJECTORY, cfg.params)
    history = thetas(cfg.params, steps)
    write_run_record(out / "starts", cfg, {"seed": cfg.seed}, name=f"tune-{int(time.time())}")
    with contextlib.ExitStack() as stack:
        if play is None:
            pool = stack.enter_context(worker_pool(cfg.processes))

            def submit(share: Share) -> Callable[[], MatchResult]:
                return pool.apply_async(play_share, (share,)).get
        else:
            def submit(share: Share) -> Callable[[], MatchResult]:
                result = play(share)
                return lambda: result
        trajectory = stack.enter_context(open(out / TRAJECTORY, "ab", buffering=0))
        bar = stack.enter_context(tqdm(total=cfg.iterations, initial=len(steps), unit=" iterations",
                                       desc="SPSA", disable=not progress, dynamic_ncols=True))
        in_flight: dict[int, tuple[_Probe, Callable[[], MatchResult]]] = {}
        while len(steps) < cfg.iterations:
            # Iteration k probes around θ after k − P iterations, so P of them are in flight at a time.
            for k in range(len(steps) + len(in_flight) + 1, min(cfg.iterations, len(steps) + cfg.processes) + 1):
                probe, opening = _probe(cfg, k, history[max(0, k - cfg.processes)], openings)
                share = Share(spec + settings_suffix(cfg.params, probe.plus),
                              spec + settings_suffix(cfg.params, probe.minus), [opening], mix_seed(cfg.seed, k))
                in_flight[k] = probe, submit(share)
            probe, result = in_flight.pop(len(steps) + 1)
            match = result()
            theta = spsa_update(cfg.params, history[-1], probe.c, probe.r, probe.flip, match.wins - match.losses)
            names = [p.name for p in cfg.params]
            step = Step(probe.iteration, probe.opening, dict(zip(names, probe.flip)), dict(zip(names, probe.c)),
                        dict(zip(names, probe.plus)), dict(zip(names, probe.minus)), match.wins, match.draws,
                        match.losses, dict(zip(names, theta)))
            append_whole(trajectory, step.line())
            os.fsync(trajectory.fileno())
            steps.append(step)
            history.append(theta)
            bar.update()
            bar.set_postfix_str(settings_suffix(cfg.params, theta)[1:].replace(":", " "))
    return steps


def summary(cfg: TuneConfig, steps: list[Step]) -> str:
    """The tuned values, ready to use: --set lines, a spec suffix and the verification match to run."""
    theta = thetas(cfg.params, steps)[-1]
    wins, draws, losses = (sum(getattr(s, key) for s in steps) for key in ("wins", "draws", "losses"))
    lines = [f"SPSA: {len(steps)} of {cfg.iterations} iterations, {2 * len(steps)} games "
             f"(the + side scored +{wins} ={draws} -{losses})"]
    for p, value in zip(cfg.params, theta):
        lines.append(f"  {p.name:<20} {_text(p, p.start):>8} -> {_text(p, value):<8} in [{p.min:g}, {p.max:g}]")
    tuned_values = list(zip(cfg.params, theta))
    lines.append("as search settings (SearchConfig, for a game searched alone on the clock):")
    lines += [f"  --set search.{p.name}={_text(p, v)}" for p, v in tuned_values if p.name not in TIME_MANAGER_SETTINGS]
    if any(p.name in TIME_MANAGER_SETTINGS for p in cfg.params):
        lines.append("as time manager settings (selfplay.tree_search.time_manager.TimeManager):")
        lines += [f"  {p.name} = {_text(p, v)}" for p, v in tuned_values if p.name in TIME_MANAGER_SETTINGS]
    tuned = base_spec(cfg) + settings_suffix(cfg.params, theta)
    lines.append(f"as a player spec: {tuned}")
    lines.append(f'verify (at equal time, the whole ballot): python benchmarks/split_match.py "{tuned}" '
                 f'"{base_spec(cfg)}" --processes {cfg.processes}')
    return "\n".join(lines)
