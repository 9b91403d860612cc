"""One self-play actor: many games in lockstep with one network, finished games into the replay store.

`run_actor(run_dir, actor_id, config, games)` is the whole process (a module-level function, so the
selfplay command and the loop's supervisor can spawn it). It

* plays `config.games_in_flight` games at once through one `BatchedSearch`: every step evaluates the
  leaves of all trees in one network batch; a game whose search is complete plays its move at once and
  starts its next search, so the trees stay busy;
* chooses per move between a full search (a policy target) and a fast one (playout-cap randomization),
  mixes Dirichlet noise into full searches' roots, samples by visits at the opening temperature, plays a
  single legal move without search, resigns below the threshold except in the play-through share of
  games (where it records who would have resigned, to measure wrong resignations), ends games at
  the rules' max_plies as draws flagged max-length, and, with `database_adjudication`, ends a game at its
  first endgame-database position with the database's value (termination "database");
* uses the run's current best checkpoint (its best-network pointer, zero.run.rundir, kept by the gatekeeper;
  the shipped checkpoint before there is one), or with `network = "newest"` the trainer's newest candidate,
  and switches between games: when a newer one appears, new
  games start with it while the games in flight finish with the network they began with (two network
  generations side by side, each with its own batch, until the old one has no game left);
* gives each game its own seed (from the run seed, the actor id and the game's index), which with the
  checkpoint decides every random choice of the game; the settings are in the run record;
* stops cleanly: SIGINT (Ctrl-C) stops starting games and finishes those in flight; a second SIGINT or
  a SIGTERM discards the games in flight. Only whole games are ever appended, and the writer's commit
  makes them visible atomically, so the store never holds half a game.
"""

from __future__ import annotations

import dataclasses
import logging
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from selfplay.replay.records import POSITION_FIELDS, GameRecord, PositionRows, padded_policy
from selfplay.tree_search.evaluators import MOST_CACHE_POSITIONS, CachedEvaluator
from selfplay.tree_search.gumbel import GumbelRoot, improved_policy_target
from selfplay.tree_search.search import (
    MOST_LEAVES_PER_TREE, MOST_SIMULATIONS, BatchedSearch, RootNoise, SearchConfig, visit_policy,
)
from zero.net.encoding import move_action
from zero.rules import movegen
from zero.rules.game import MOST_PLIES, Game, Move, Position, RulesConfig, Termination
from zero.run.config import INFERENCE_PRECISIONS, MOST_SEED, MOST_THREADS, check_settings, setting
from zero.run.rundir import RunDir, RunDirError

log = logging.getLogger(__name__)
MAX_GAMES_IN_FLIGHT = 16_384
# Positions a replay writer holds before it commits them (a policy target each, some kilobytes).
MOST_QUEUED_POSITIONS = 1 << 20

@dataclass
class SelfPlayConfig:
    """Settings of self-play actors (the `selfplay` command's --config / --set; `[selfplay]` in the loop's).
    How a tree is searched is `search` (PUCT); everything else here is what self-play does with it."""

    # Games per actor searched in lockstep (network batch ~ this x leaves_per_tree). At most 16,384: each
    # holds a tree pool of hundreds of kilobytes, so 100 million asked for 34 TiB.
    games_in_flight: int = setting(64, low=1, high=MAX_GAMES_IN_FLIGHT)
    openings: str = ""  # ballot file (relative to the data folder, or absolute); "" = start position only
    # With a ballot: share of games that begin with one of its openings.
    opening_share: float = setting(0.5, low=0, high=1)
    # Playout-cap randomization: a share of moves get a full search, whose visits are policy targets; the
    # others a fast one that only plays the move. 200 / 32 rather than 400 / 64: on the 2-core CPU, with two
    # actors and the newest network, they made more of the loop's 60 CPU-minutes (benchmarks/RESULTS.md,
    # "Two actors, 200 / 32 and the newest network against a same-day run of the defaults").
    full_simulations: int = setting(200, low=1, high=MOST_SIMULATIONS)
    fast_simulations: int = setting(32, low=1, high=MOST_SIMULATIONS)
    full_search_prob: float = setting(0.25, low=0, high=1)
    dirichlet_alpha: float = setting(1.0, above=0)  # alpha x legal moves ~ 8-10, AlphaZero's ratio in chess, Go
    dirichlet_fraction: float = setting(0.25, low=0, high=1)  # share of the root prior replaced by noise
    noise_in_fast_searches: bool = False  # fast searches give no target, so noise only weakens their play
    temperature: float = setting(1.0, low=0)  # move sampling ~ visits^(1/T) for the opening plies
    # Plies played with `temperature`; then final_temperature.
    temperature_plies: int = setting(16, low=0, high=MOST_PLIES)
    final_temperature: float = setting(0.0, low=0)  # 0 = always the most visited move
    # The policy target of a full search: "visits" (AlphaZero's visit shares) or "improved" (Gumbel
    # AlphaZero's softmax(log prior + sigma(completed Q)), selfplay.tree_search.gumbel: it keeps the network's belief
    # in moves a small search left unvisited).
    policy_target: str = setting("visits", choices=("visits", "improved"))
    # How a full search treats its root: "puct" with Dirichlet noise and the opening temperature, or
    # "gumbel": sequential halving among the `gumbel_considered` moves Gumbel noise samples from the prior,
    # the last one standing played (selfplay.tree_search.gumbel; no Dirichlet noise, no temperature: the Gumbel noise
    # explores). Fast searches stay PUCT. The paper pairs it with policy_target = "improved".
    root_search: str = setting("puct", choices=("puct", "gumbel"))
    gumbel_considered: int = setting(16, low=1, high=movegen.MAX_MOVES)
    resign_threshold: float = -0.9  # resign when the root value for the side to move falls below this
    resign_min_ply: int = setting(20, low=0, high=MOST_PLIES)  # no resignation before this ply
    # Share of games that never resign, to measure wrong resignations.
    resign_playthrough: float = setting(0.1, low=0, high=1)
    # End a game at its first position in the endgame database (the largest built; the 4-piece one is built
    # on first use), with the database's value. Off by default: the moves played there are policy targets
    # and the solved-endgame mistake rate in `replay stats` shows whether the network learns endgames
    # (the trainer's value targets can be the database's too, trainer.database_targets, off by default).
    database_adjudication: bool = False
    # "auto": CUDA when torch sees a GPU (bf16 autocast, sized by the gpu_ settings below), else the CPU.
    device: str = "auto"  # "auto", "cpu" or "cuda"
    # On CUDA a batch of a few thousand leaves keeps the GPU busy where the CPU's 64 x 2 already saturates
    # a core: these take the place of games_in_flight and search.leaves_per_tree when the network runs there.
    gpu_games_in_flight: int = setting(512, low=1, high=MAX_GAMES_IN_FLIGHT)
    gpu_leaves_per_tree: int = setting(4, low=1, high=MOST_LEAVES_PER_TREE)
    torch_threads: int = setting(1, low=1, high=MOST_THREADS)  # CPU threads per actor for inference
    # Network answers an actor remembers by position (selfplay.tree_search.evaluators.CachedEvaluator; its search
    # expands a remembered leaf without the network), about 4 KB each, for the games of one network; 0 for
    # none. Games from the same openings and the trees of consecutive moves meet the same positions: on
    # the CPU a third of the leaves were remembered and an actor played 1.3x the moves an hour
    # (benchmarks/RESULTS.md).
    cache_positions: int = setting(32_768, low=0, high=MOST_CACHE_POSITIONS)
    # "auto": the checkpoint's int8 model on the CPU (zero.net.quantized, about 1.7x float32's evaluations a
    # second, its near ties answered in float32: zero.net.inference), float32 (bf16 autocast) on a GPU;
    # "float32" everywhere; "int8" and "int8-raw" (near ties not answered again) only on the CPU;
    # "bfloat16" torch under bf16 autocast anywhere (on the CPU: a GPU's arithmetic, rehearsed).
    precision: str = setting("auto", choices=INFERENCE_PRECISIONS)
    # Which network plays: "best", the gatekeeper's promoted network (AlphaGo Zero's way), or "newest", the
    # trainer's newest candidate (AlphaZero's way: the games come from the freshest network, while the
    # gatekeeper still decides what is promoted and shipped). Newest by default: with an actor on every core
    # the gatekeeper, at a lower priority, decides a gate or two an hour, and "best" left the actors on the
    # starting network for most of a run.
    network: str = setting("newest", choices=("best", "newest"))
    checkpoint_poll_seconds: float = setting(30.0, low=0)  # how often to look for a newer network
    # An actor's process priority in the loop (os.nice's scale below the loop's own, 0 = as the trainer). With
    # an actor on every core the trainer shares its core with them and trains fewer samples a position than
    # `trainer.samples_per_position` allows; a lower priority lets it take what it needs first. At 3 on 2 AMD cores the trainer reached its
    # cap (3.99 samples a position against 3.26) but self-play made 13 % fewer positions and the network was
    # no stronger at 60 CPU-minutes (-8, -42 .. +25 Elo), so the default leaves the actors level.
    niceness: int = setting(0, low=0, high=19)
    # The replay writer commits once this many positions are queued ...
    commit_positions: int = setting(1024, low=1, high=MOST_QUEUED_POSITIONS)
    commit_seconds: float = setting(30.0, low=0)  # ... or once the oldest queued game has waited this long
    # The run's seed: game seeds derive from it, the actor id and the game index.
    seed: int = setting(0, low=0, high=MOST_SEED)
    search: SearchConfig = field(default_factory=SearchConfig)
    rules: RulesConfig = field(default_factory=RulesConfig)

    def validate(self) -> None:
        check_settings(self, "selfplay")
        self.search.validate()
        if self.device not in ("auto", "cpu", "cuda"):
            raise ValueError(f"selfplay.device must be auto, cpu or cuda, not {self.device!r}")

    def temperature_at(self, ply: int) -> float:
        return self.temperature if ply < self.temperature_plies else self.final_temperature

    def sized_for(self, cuda: bool) -> "SelfPlayConfig":
        """These settings with `device` resolved ("auto" -> cuda when `cuda`, else cpu) and, on CUDA, the
        GPU's games in flight and leaves per tree in place of the CPU's."""
        device = ("cuda" if cuda else "cpu") if self.device == "auto" else self.device
        if device != "cuda":
            return dataclasses.replace(self, device=device)
        return dataclasses.replace(self, device=device, games_in_flight=self.gpu_games_in_flight,
                                   search=dataclasses.replace(self.search, leaves_per_tree=self.gpu_leaves_per_tree))


def actors_for_machine(setting: int, cuda: bool, cpu_cores: int) -> int:
    """How many self-play actors a loop runs: `setting`, or for -1 (sized for the machine) one per core left
    after the trainer and the gatekeeper take theirs (at least one), and on a CPU-only machine at least two
    where there are two cores: there the trainer shares a core with the actors, and two actors on two cores
    taught more in 60 CPU-minutes than one (benchmarks/RESULTS.md)."""
    if setting >= 0:
        return setting
    spare = max(1, cpu_cores - 2)
    return spare if cuda else max(min(2, cpu_cores), spare)


@dataclass
class ActorStats:
    """What an actor did; sent to the parent as progress and returned at the end."""

    actor_id: int
    games: int = 0
    positions: int = 0
    full_searches: int = 0
    discarded_games: int = 0
    resigned: int = 0
    # Play-through games in which a side would have resigned, and those of them it did not lose.
    would_resign: int = 0
    wrong_resignations: int = 0
    results: dict[str, int] = field(default_factory=lambda: {"black": 0, "white": 0, "draw": 0})
    checkpoint: str = ""
    moves: int = 0  # moves played, in finished games and in games still in flight or discarded
    simulations: int = 0  # search simulations (network leaves plus visits to terminal nodes)
    leaves: int = 0  # positions evaluated by the network
    tree_seconds: float = 0.0  # selection, rules checks, input planes, expansion, backup
    evaluate_seconds: float = 0.0
    elapsed: float = 0.0


@dataclass
class CheckpointInfo:
    path: Path
    name: str
    step: int


def current_best(run_dir: Path) -> CheckpointInfo:
    """The run's best checkpoint, or the shipped checkpoint before the run has one."""
    from zero.net.checkpoint import DEFAULT_CHECKPOINT, CheckpointError, load_checkpoint

    run = RunDir(run_dir)
    try:
        best = run.read_best()
    except RunDirError as exc:
        raise CheckpointError(str(exc)) from None
    if best is not None:
        return CheckpointInfo(best.path, best.name, best.step)
    try:
        step = load_checkpoint(DEFAULT_CHECKPOINT).step
    except CheckpointError as exc:
        raise CheckpointError(f"no best checkpoint yet ({run.best_file} is absent) and the shipped checkpoint "
                              f"cannot be used: {exc}") from None
    return CheckpointInfo(DEFAULT_CHECKPOINT, DEFAULT_CHECKPOINT.stem, step)


def newest_network(run_dir: Path) -> CheckpointInfo:
    """The trainer's newest candidate, or the run's best before there is one."""
    candidates = RunDir(run_dir).candidates()
    if candidates:
        step, path = candidates[-1]
        return CheckpointInfo(path, path.stem, step)
    return current_best(run_dir)


def load_ballot(name: str) -> list:
    """zero.corpus.openings.Opening list of a ballot file (relative to the data folder, or absolute); [] for ""."""
    if not name:
        return []
    from zero.corpus.openings import load_openings
    from zero.run.data import require_data_file

    path = Path(name)
    return load_openings(path if path.is_absolute() else require_data_file(name))


def game_seed(run_seed: int, actor_id: int, index: int) -> int:
    """Seed of an actor's index-th game: independent streams per (run, actor, game)."""
    return int(np.random.SeedSequence([run_seed, actor_id, index]).generate_state(1, np.uint32)[0])


@dataclass
class _GameInFlight:
    game: Game
    seed: int
    seed_index: int
    rng: np.random.Generator
    opening: str
    playthrough: bool  # never resigns: measures wrong resignations
    rows: dict[str, list] = field(default_factory=lambda: {name: [] for name in POSITION_FIELDS})
    full_search: bool = False
    would_resign_side: int = 0
    would_resign_ply: int = -1





class _Generation:
    """One network and the games that began with it (a tree slot per game)."""

    def __init__(self, evaluator, checkpoint: CheckpointInfo, config: SelfPlayConfig):
        self.evaluator = evaluator
        self.checkpoint = checkpoint
        self.search = BatchedSearch(config.games_in_flight, config.search, config.rules,
                                    simulations=max(config.full_simulations, config.fast_simulations))
        self.slots: list[_GameInFlight | None] = [None] * config.games_in_flight

    def in_flight(self) -> int:
        return sum(s is not None for s in self.slots)


class StopRequest:
    """Set by signal handlers: 'finish' the games in flight, or 'discard' them."""

    def __init__(self) -> None:
        self.mode: str | None = None

    def install(self, handle_sigint: bool = True) -> None:
        """SIGUSR1: finish; SIGTERM: discard; SIGINT: finish, the second one discard (or ignored, for a
        parent that takes Ctrl-C itself and passes its decision on as SIGUSR1 / SIGTERM)."""

        def finish(signum, frame):
            if self.mode is None:
                self.mode = "finish"
                log.info("stop requested: finishing the games in flight")
            elif signum == signal.SIGINT:
                self.mode = "discard"

        def discard(signum, frame):
            self.mode = "discard"

        signal.signal(signal.SIGUSR1, finish)
        signal.signal(signal.SIGTERM, discard)
        signal.signal(signal.SIGINT, finish if handle_sigint else signal.SIG_IGN)


class Actor:
    """Self-play in one process; see the module docstring. `load_evaluator(checkpoint_info)` builds the
    network evaluator (the default loads the checkpoint onto config.device)."""

    def __init__(self, run_dir: str | Path, actor_id: int, config: SelfPlayConfig, games: int | None = None,
                 load_evaluator: Callable[[CheckpointInfo], object] | None = None,
                 progress: Callable[[ActorStats], None] | None = None):
        config.validate()
        import torch

        config = config.sized_for(torch.cuda.is_available())
        self.run_dir = Path(run_dir)
        self.actor_id = actor_id
        self.config = config
        self.games_limit = games
        self.load_evaluator = load_evaluator or self._load_network
        self.progress = progress or (lambda stats: None)
        self.stats = ActorStats(actor_id)
        self.stop = StopRequest()
        self._started_games = 0
        self._first_index = 0  # the first seed index no committed game of this actor has used
        self._openings = load_ballot(config.openings)
        self._egdb = None
        if config.database_adjudication:
            from zero.endgames.egdb_build import largest_available

            self._egdb = largest_available()

    # -- set-up --------------------------------------------------------------------------------------
    def _load_network(self, info: CheckpointInfo):
        import torch

        from zero.net.inference import Evaluator

        torch.set_num_threads(self.config.torch_threads)
        evaluator = Evaluator.from_checkpoint(info.path, device=self.config.device, precision=self.config.precision)
        log.info("actor %d: network on %s in %s (%s); %d games in flight x %d leaves per tree", self.actor_id,
                 evaluator.device, evaluator.precision, evaluator.backend, self.config.games_in_flight,
                 self.config.search.leaves_per_tree)
        return evaluator

    def _playing_network(self) -> CheckpointInfo:
        return newest_network(self.run_dir) if self.config.network == "newest" else current_best(self.run_dir)

    def _newer_generation(self, newest: _Generation) -> _Generation | None:
        """A generation for a network newer than `newest`'s (config.network's), if there is one that loads."""
        from zero.net.checkpoint import CheckpointError

        try:
            info = self._playing_network()
            if (info.path, info.step) == (newest.checkpoint.path, newest.checkpoint.step):
                return None
            return self._new_generation(info)
        except (CheckpointError, OSError, ValueError, KeyError) as exc:
            # A bad promotion must not stop self-play: keep the current network and look again later.
            log.warning("actor %d: cannot switch to the newer network (%s); keeping %s",
                        self.actor_id, exc, newest.checkpoint.name)
            return None

    def _new_generation(self, info: CheckpointInfo | None = None) -> _Generation:
        info = info or self._playing_network()
        log.info("actor %d: using checkpoint %s (step %d)", self.actor_id, info.path, info.step)
        self.stats.checkpoint = info.name
        evaluator = self.load_evaluator(info)
        if self.config.cache_positions:
            evaluator = CachedEvaluator(evaluator, self.config.cache_positions)
        return _Generation(evaluator, info, self.config)

    # -- games ---------------------------------------------------------------------------------------
    def _may_start_game(self) -> bool:
        return self.stop.mode is None and (self.games_limit is None or self._started_games < self.games_limit)

    def _start_game(self, gen: _Generation, g: int) -> None:
        seed_index = self._first_index + self._started_games
        seed = game_seed(self.config.seed, self.actor_id, seed_index)
        self._started_games += 1
        rng = np.random.default_rng(seed)
        start, opening = Position.initial(), "start"
        if self._openings and rng.random() < self.config.opening_share:
            chosen = self._openings[int(rng.integers(len(self._openings)))]
            start = chosen.start
            for move in chosen.replay():
                start = start.play(move)
            # Ballot moves are man moves: the game can begin after them with nothing lost for the rules.
            opening = " ".join(chosen.moves)
        playthrough = rng.random() < self.config.resign_playthrough
        slot = _GameInFlight(Game(start, rules=self.config.rules), seed, seed_index, rng, opening, playthrough)
        gen.slots[g] = slot
        gen.search.set_root(g, slot.game)
        self._next_search(gen, g)

    def _next_search(self, gen: _Generation, g: int) -> None:
        """Play forced moves without search, then start the search for the next real choice (or finish)."""
        slot = gen.slots[g]
        game = slot.game
        cfg = self.config
        while True:
            # Not at ply 0: a game that begins inside the database (an odd ballot) still gets one row.
            if game.outcome is None and self._egdb is not None and game.ply > 0 and \
                    game.position.piece_count() <= self._egdb.max_pieces:
                value = self._egdb.probe(game.position).value
                side = 1 if game.position.black_to_move else -1
                game.finish(side * value, Termination.DATABASE)  # value: +1 win, 0 draw, -1 loss for the mover
            if game.outcome is not None:
                self._finish_game(gen, g)
                return
            legal = game.legal_moves()
            if len(legal) > 1:
                break
            self._add_row(slot, np.array([move_action(legal[0], game.position.black_to_move)], np.int16),
                          np.ones(1, np.float32), full=False, forced=True, value=gen.search.root_value(g))
            self._play(gen, g, legal[0])
        slot.full_search = bool(slot.rng.random() < cfg.full_search_prob)
        simulations = cfg.full_simulations if slot.full_search else cfg.fast_simulations
        if slot.full_search and cfg.root_search == "gumbel":
            gen.search.start(g, simulations, halving=GumbelRoot(slot.rng, cfg.gumbel_considered))
            return
        noisy = slot.full_search or cfg.noise_in_fast_searches
        noise = RootNoise(slot.rng, cfg.dirichlet_alpha, cfg.dirichlet_fraction) if noisy else None
        gen.search.start(g, simulations, noise)

    def _play(self, gen: _Generation, g: int, move: Move) -> None:
        game = gen.slots[g].game
        game.play(move)
        self.stats.moves += 1
        gen.search.play(g, move, game)

    def _add_row(self, slot: _GameInFlight, actions: np.ndarray, shares: np.ndarray, full: bool, forced: bool,
                 value: float) -> None:
        game, rows = slot.game, slot.rows
        pos = game.position
        padded_actions, padded_shares = padded_policy(actions, shares)
        for name, value_ in (("black", pos.black), ("white", pos.white), ("kings", pos.kings),
                             ("black_to_move", pos.black_to_move), ("no_progress", game.no_progress[-1]),
                             ("repetitions", game.repetitions()), ("ply", game.ply),
                             ("policy_actions", padded_actions), ("policy_visits", padded_shares),
                             ("full_search", full), ("forced", forced), ("root_value", value)):
            rows[name].append(value_)

    def _move_chosen(self, gen: _Generation, g: int) -> None:
        """Tree g's search is complete: resign, or record the position and play the chosen move."""
        slot = gen.slots[g]
        game, search, cfg = slot.game, gen.search, self.config
        search.stop(g)
        pos = game.position
        value = search.root_value(g)
        if game.ply >= cfg.resign_min_ply and value < cfg.resign_threshold:
            side = 1 if pos.black_to_move else -1
            if not slot.playthrough:
                game.finish(-side, Termination.RESIGNATION)
                self._finish_game(gen, g)
                return
            if slot.would_resign_side == 0:
                slot.would_resign_side, slot.would_resign_ply = side, game.ply
        children = search.root_children(g)
        if cfg.policy_target == "improved":
            actions, shares = improved_policy_target(children, search.network_prior(g), pos.black_to_move)
        else:
            actions, shares = visit_policy(children, pos.black_to_move)
        self._add_row(slot, actions, shares, full=slot.full_search, forced=False, value=value)
        self.stats.full_searches += slot.full_search
        halved = search.halving_choice(g) if search.root_proven(g) is None else None
        k = children.best(cfg.temperature_at(game.ply), slot.rng) if halved is None else halved
        self._play(gen, g, children.move(k, pos))
        self._next_search(gen, g)

    def _finish_game(self, gen: _Generation, g: int) -> None:
        slot = gen.slots[g]
        gen.slots[g] = None
        gen.search.stop(g)
        record = self._record(slot, gen.checkpoint)
        self.writer.append_game(record)
        s = self.stats
        s.games += 1
        s.positions += record.length
        s.results[{1: "black", -1: "white", 0: "draw"}[record.winner]] += 1
        s.resigned += record.termination == Termination.RESIGNATION.value
        if slot.would_resign_side:
            s.would_resign += 1
            s.wrong_resignations += record.winner != -slot.would_resign_side
        self.progress(s)

    def _record(self, slot: _GameInFlight, checkpoint: CheckpointInfo) -> GameRecord:
        from zero.corpus.pdn import write_game

        game, rows = slot.game, slot.rows
        n = game.ply
        positions = PositionRows.from_lists(rows)
        outcome = game.outcome
        cfg = self.config
        pdn = write_game(game.moves, outcome.pdn_result, start=game.start, tags={
            "Event": "checkers-zero self-play", "Round": str(slot.seed),
            "Black": checkpoint.name, "White": checkpoint.name, "Opening": slot.opening,
            "Termination": outcome.termination.value,
            "Search": f"full {cfg.full_simulations} p={cfg.full_search_prob} fast {cfg.fast_simulations}",
        })
        return GameRecord(
            positions=positions, winner=outcome.winner, termination=outcome.termination.value, length=n,
            opening=slot.opening, pdn=pdn, seed=slot.seed, seed_index=slot.seed_index, checkpoint=checkpoint.name,
            model_version=checkpoint.step, would_resign_side=slot.would_resign_side,
            would_resign_ply=slot.would_resign_ply,
        )

    def _add_times(self, gen: _Generation) -> None:
        times = gen.search.times
        self.stats.tree_seconds += times.tree_seconds
        self.stats.evaluate_seconds += times.evaluate
        self.stats.leaves += times.leaves
        self.stats.simulations += times.simulations

    # -- main loop -----------------------------------------------------------------------------------
    def run(self) -> ActorStats:
        t0 = time.perf_counter()
        generations = [self._new_generation()]
        last_poll = time.monotonic()
        from selfplay.replay.replay_buffer import ReplayWriter

        with ReplayWriter(self.run_dir, self.actor_id, commit_positions=self.config.commit_positions,
                          commit_seconds=self.config.commit_seconds) as self.writer:
            # Games are committed in the order they finish, not the order they started: go on after the
            # highest seed index committed, not after the count of committed games.
            self._first_index = self.writer.next_seed_index
            while True:
                if self.stop.mode == "discard":
                    self.stats.discarded_games += sum(gen.in_flight() for gen in generations)
                    break
                newest = generations[-1]
                if time.monotonic() - last_poll > self.config.checkpoint_poll_seconds and self._may_start_game():
                    last_poll = time.monotonic()
                    newer = self._newer_generation(newest)
                    if newer is not None:
                        newest = newer
                        generations.append(newest)
                # Refill: new games only in the newest generation, never more than games_in_flight in all.
                free = self.config.games_in_flight - sum(gen.in_flight() for gen in generations)
                for g in range(len(newest.slots)):
                    if free <= 0 or not self._may_start_game():
                        break
                    if newest.slots[g] is None:
                        self._start_game(newest, g)
                        free -= newest.slots[g] is not None
                for gen in generations:
                    if gen is not newest and not gen.in_flight():
                        self._add_times(gen)
                generations = [gen for gen in generations if gen is newest or gen.in_flight()]
                if not any(gen.in_flight() for gen in generations):
                    break
                for gen in generations:
                    gen.search.step(gen.evaluator)
                    for g in np.flatnonzero(gen.search.complete()):
                        self._move_chosen(gen, int(g))
            for gen in generations:
                self._add_times(gen)
        self.stats.elapsed = time.perf_counter() - t0
        self.progress(self.stats)
        return self.stats


def run_actor(run_dir: str, actor_id: int, config: SelfPlayConfig, games: int | None = None,
              progress_queue=None, handle_sigint: bool = True) -> ActorStats:
    """Process entry point: play until `games` games are done (None: until stopped by a signal).

    Stop it with SIGUSR1 or SIGINT (finish the games in flight) or SIGTERM (discard them); either way it
    commits its finished games and exits 0. Progress (ActorStats after every game) goes to progress_queue."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    progress = progress_queue.put if progress_queue is not None else None
    actor = Actor(run_dir, actor_id, config, games, progress=progress)
    actor.stop.install(handle_sigint)
    try:
        return actor.run()
    finally:
        # Every finished game is committed by now, so a stop signal that still comes (a second Ctrl-C right
        # after the first) has nothing left to stop. Python puts the default handlers back while the
        # process shuts down, and such a signal would then kill it and make a clean stop look like a crash;
        # it leaves ignored signals ignored.
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1):
            signal.signal(sig, signal.SIG_IGN)
