"""Gating: candidate checkpoints play the current best; only a winner of the match is promoted.

The gatekeeper owns three files of the run directory (zero.run.rundir), each rewritten atomically:
- the best-network pointer (actors switch to it between games);
- the ratings: the pairwise results behind every rating (train.arena.ratings);
- the gating log: one line per decided candidate (append-only; a torn last line is ignored on reading): promoted,
  rejected, skipped (a newer one came first) or refused (its checkpoint does not load, zero.net.checkpoint).
  A gate's line is written (and a promotion made) as soon as its SPRT decides, before the candidate's rating
  games; the line names the yardsticks it owes, and a rating cut short by a stop is finished between gates.
Every match is saved as PDN in the run's matches folder. While a match is played, each finished game is appended to
its journal (zero.run.rundir `match_journal`); a match interrupted by a stop or a crash resumes from its journal, so
only the games in flight are played again, and the gatekeeper finishes the match in progress before it takes a newer
candidate. A match's games enter the ratings once, when it is decided, keyed by its name, so nothing is counted twice.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

from selfplay.actors.actor import MAX_GAMES_IN_FLIGHT, load_ballot
from selfplay.tree_search.evaluators import CachedEvaluator
from selfplay.tree_search.search import MOST_SIMULATIONS, SearchConfig
from train.arena.match import (MATCH_CACHE_POSITIONS, MatchGame, MatchResult, NetworkPlayer, format_elo,
                               format_elo_interval, match_schedule, play_match)
from train.arena.player_specs import make_player
from train.arena.ratings import YARDSTICKS, PlayerInfo, RatingsTable
from train.arena.sprt import PairSprt, SprtConfig
from zero.endgames.egdb import Egdb
from zero.endgames.egdb_build import BuildInterrupted, largest_available
from zero.net.checkpoint import CheckpointError, load_checkpoint
from zero.net.inference import Evaluator
from zero.net.quantized import cache_path
from zero.rules.game import RulesConfig
from zero.run.config import (
    MOST_GAMES, MOST_SEED, MOST_THREADS, append_line_durably, atomic_write_bytes, notify, setting,
)
from zero.run.rundir import RunDir

log = logging.getLogger(__name__)

@dataclass
class GatingConfig:
    """Fixed search settings for every gating and rating game (no noise, most visited move); the `match`
    command's network players search the same way. The game-length cap is the rules' max_plies."""

    simulations: int = setting(64, low=1, high=MOST_SIMULATIONS)  # root visits per move for both networks
    # Games in flight (their leaves share one network batch).
    parallel_games: int = setting(48, low=1, high=MAX_GAMES_IN_FLIGHT)
    # ... when the networks run on a GPU, where each batch is a round trip shared with the actors: the whole
    # gate at once (2 x sprt.max_pairs), so a gate costs one game's batches.
    gpu_parallel_games: int = setting(288, low=1, high=MAX_GAMES_IN_FLIGHT)
    # The most pairs a gate's games may reach ahead of the pair its SPRT counts next (whose own games always
    # start). Pairs count in ballot order, and in lockstep every game in flight slows the others: a first gate
    # had finished 119 games but counted 3 pairs at 10.3 min, behind one long game of pair 4 (issue 85, item 8).
    # With a window the later games finish and none start, and the long game's moves come faster in a smaller
    # batch. Unset: half the games in flight (24 pairs on a CPU, the whole gate on a GPU), so the batch fills
    # from the start as before, and at most a batch's worth of games runs ahead of a count that may decide
    # before it needs them. Smaller never fills the batch (a smaller parallel_games in effect); larger keeps
    # the long game slow for longer. A GPU's step is a round trip whatever its batch: a smaller batch there
    # speeds nothing up.
    pairs_ahead: int | None = setting(None, low=1, high=MOST_GAMES)
    # One leaf per tree per network batch, so that no virtual loss bends a fixed, small budget (the many
    # games in flight fill the batch instead).
    search: SearchConfig = field(default_factory=lambda: SearchConfig(leaves_per_tree=1))
    openings: str = "openings/acf_3move_144.txt"  # relative to the data folder, or an absolute path
    sprt: SprtConfig = field(default_factory=SprtConfig)
    # Rating games against each yardstick for every decided candidate (half with each colour).
    rating_games: int = setting(12, low=0, high=MOST_GAMES)
    rating_yardsticks: list[str] = field(default_factory=lambda: ["alphabeta:2", "alphabeta:4", "alphabeta:6",
                                                                  "alphabeta:8"])
    # Games between neighbouring yardsticks, played once per run, that pin the yardsticks to the anchor.
    calibration_games: int = setting(24, low=0, high=MOST_GAMES)
    device: str = setting("auto", choices=("auto", "cpu", "cuda"))
    # CPU threads for the networks (the other cores: actors, trainer).
    torch_threads: int = setting(1, low=1, high=MOST_THREADS)
    # The gatekeeper's process priority in the loop (os.nice's scale over the room below the loop's own
    # priority: 0 = as the others, 19 = only idle cycles; train.loop.supervisor.below_the_loop). On a
    # 2-core machine an even share gave gating 69 % of a core, mostly for candidates it rejected, and the
    # actor 81 %; at 10 the actor had 97 %, and 60 CPU-minutes of the loop made 28 % more positions and a
    # network +25 (-3 .. +54) stronger (benchmarks/RESULTS.md, 2026-11-27). Gates still get the trainer's
    # idle time. With CUDA the gates' networks share the GPU with the actors, and gating keeps an even share
    # (gpu_niceness; a lower priority there was not measured).
    niceness: int = setting(10, low=0, high=19)
    gpu_niceness: int = setting(0, low=0, high=19)
    seed: int = setting(7, low=0, high=MOST_SEED)
    # Judge the endgame moves of every recorded match against the endgame database: each player's
    # solved-endgame mistake rate in the ratings table (zero.endgames.endgame_judge).
    judge_endgames: bool = True

    def process_niceness(self, cuda: bool) -> int:
        """The gatekeeper's niceness: the GPU's setting when the networks run on CUDA, else the CPU's."""
        return self.gpu_niceness if self.on_gpu(cuda) else self.niceness

    def on_gpu(self, cuda: bool) -> bool:
        """Whether gating's networks run on CUDA (`device` "cuda", or "auto" on a machine with CUDA)."""
        return self.device == "cuda" or (self.device == "auto" and cuda)

    def games_in_flight(self, cuda: bool) -> int:
        """The games a match keeps in flight: the GPU's number when the networks run on CUDA, else the CPU's."""
        return self.gpu_parallel_games if self.on_gpu(cuda) else self.parallel_games

    def gate_window(self, cuda: bool) -> int:
        """The pairs a gate's games may reach ahead of its SPRT's count (pairs_ahead, or half the games in
        flight, rounded up so that they fill)."""
        return self.pairs_ahead if self.pairs_ahead is not None else (self.games_in_flight(cuda) + 1) // 2


def read_gating_log(run_dir: Path) -> list[dict]:
    path = RunDir(run_dir).gating_log
    if not path.exists():
        return []
    entries = []
    for line in path.read_text().splitlines():
        try:
            entries.append(json.loads(line))
        except json.JSONDecodeError:
            break  # a line torn by a crash: the decision it held was not completed
    return entries


def append_gating_log(run_dir: Path, *new: dict) -> None:
    """Append entries in one write: a reader (the loop's console) sees all of them or none."""
    entries = read_gating_log(run_dir) + list(new)
    atomic_write_bytes(RunDir(run_dir).gating_log, "".join(json.dumps(e) + "\n" for e in entries).encode())


class GatingInterrupted(Exception):
    """The gatekeeper was asked to stop in the middle of a match (its finished games are in its journal)."""


class MatchJournal:
    """The finished games of one match in progress, one JSON line per game, appended as each game ends.

    Appending (with fsync) costs one line per game where rewriting the file would cost the whole match; a
    line torn by a crash is the last one, and reading stops there. A game that does not replay under the
    rules (a hand-edited or damaged line) also ends the reading: the games from it on are played again."""

    def __init__(self, path: Path, a: str, b: str):
        self.path = path
        self.a, self.b = a, b

    def read(self, openings, rules: RulesConfig) -> MatchResult:
        done = MatchResult(self.a, self.b)
        if not self.path.exists():
            return done
        for line in self.path.read_text().splitlines():
            try:
                entry = json.loads(line)
                opening_index = int(entry["opening_index"])
                game = MatchGame.from_json(entry, openings[opening_index], rules)
                if {game.black, game.white} != {self.a, self.b}:
                    raise ValueError(f"a game of {game.black} and {game.white}")
            except (ValueError, KeyError, TypeError, IndexError) as exc:
                log.warning("%s: reading stops at a line that is not a finished game of this match (%s); the "
                            "games from there on are played again", self.path, exc)
                break
            done.add(game, game.black == self.a, opening_index)
        return done

    def append(self, game: MatchGame, result: MatchResult) -> None:
        append_line_durably(self.path, json.dumps({**game.to_json(), "opening_index": result.opening_index[-1]}) + "\n")


class Gatekeeper:
    """Decides candidates one at a time; state lives in the run directory only."""

    def __init__(self, run_dir: Path, cfg: GatingConfig, rules: RulesConfig = RulesConfig(),
                 should_stop: Callable[[], bool] = lambda: False):
        self.run_dir = Path(run_dir)
        self.run = RunDir(run_dir)
        self.cfg = cfg
        self.rules = rules
        self.should_stop = should_stop
        self.openings = load_ballot(cfg.openings)
        self.device = None if cfg.device == "auto" else cfg.device
        self._sprt: PairSprt | None = None  # the gate being played, for its status
        self._window = 0  # ... and its gate_window
        self._egdb: Egdb | None = None  # the judge of recorded endgames, once loaded (_endgame_database)
        torch.set_num_threads(cfg.torch_threads)
        self.ratings_path = self.run.ratings

    # -- ratings -----------------------------------------------------------------------------------------
    def _ratings(self) -> RatingsTable:
        table = RatingsTable.load(self.ratings_path)
        for name in YARDSTICKS:
            table.add_player(PlayerInfo(name, "yardstick"))
        return table

    def calibrate_yardsticks(self, most: int | None = None) -> int:
        """Neighbouring yardsticks play each other once per run, tying them to the random anchor: at most
        `most` of the matches still to play (all by default). Returns the number of matches finished."""
        table = self._ratings()
        finished = 0
        ladder = list(zip(YARDSTICKS, YARDSTICKS[1:]))
        for rung, (weaker, stronger) in enumerate(ladder, 1):
            name = f"calibration-{stronger}-vs-{weaker}"
            if table.results.get("|".join(sorted((weaker, stronger)))):
                self._close_journal(name)
                continue
            if most is not None and finished >= most:
                break
            result = self._recorded_match(name, make_player(stronger, self.cfg.seed),
                                          make_player(weaker, self.cfg.seed + 1), stronger, weaker, self.cfg.seed,
                                          self.cfg.calibration_games, most)
            if result is None:
                break
            finished += 1
            # On the console: the ladder is what a first run's gatekeeper does for its first minutes.
            notify(f"calibration {stronger} vs {weaker}: +{result.wins} ={result.draws} -{result.losses} "
                   f"(the ladder's match {rung} of {len(ladder)})")
        return finished

    def _recorded_match(self, name: str, a, b, a_name: str, b_name: str, seed: int, games: int, most: int | None,
                        *players: PlayerInfo) -> MatchResult | None:
        """A rating or calibration match played, saved and recorded; None when it was left unfinished because a
        candidate came (`_yields_to_a_candidate`): its games stay in its journal for the next call."""
        yields = self._yields_to_a_candidate(most)
        result = self._match(name, a, b, seed, games, games, should_stop=yields)
        if len(result.games) < len(match_schedule(self.openings, games)):
            return None
        try:
            # The database's first build (minutes at a low priority on a busy machine) yields as the games do;
            # the finished match stays in its journal and is recorded on the next call, no game played again.
            egdb = self._endgame_database(lambda: yields(result))
        except BuildInterrupted:
            return None
        self._save_match(result, name)
        self._record(name, a_name, b_name, result, egdb, *players)
        self._close_journal(name)
        return result

    def _yields_to_a_candidate(self, most: int | None) -> Callable[[MatchResult], bool]:
        """A rating match played between gates (`most` given) stops at its next game once a candidate waits,
        so that a gate comes within a game of the candidate, not after a whole match of yardsticks."""
        if most is None:
            return lambda _: False
        return lambda _: bool(self.pending_candidates())

    def _record(self, name: str, a: str, b: str, result: MatchResult, egdb: Egdb | None,
                *players: PlayerInfo) -> None:
        """Add a match to the ratings (and the players it introduces) at most once, keyed by its name, its
        endgame moves judged by `egdb` (when given): a stop between a match and the step that follows it
        replays the match on resume, and the replay must not count again."""
        table = self._ratings()
        if name in table.recorded:
            return  # before judging its endgames again
        for info in players:
            table.add_player(info)
        endgame = dict(zip((a, b), result.endgame_mistakes(egdb))) if egdb is not None else None
        table.record_match(name, a, b, result.wins, result.draws, result.losses, endgame)
        table.save(self.ratings_path)

    def _endgame_database(self, should_stop: Callable[[], bool] | None) -> Egdb | None:
        """The database that judges every recorded game's endgame moves (the largest built; the 4-piece one
        is built on first use; given `should_stop`, in a process of its own, broken off with BuildInterrupted
        as soon as it says so); None when judge_endgames is off."""
        if not self.cfg.judge_endgames:
            return None
        if self._egdb is None:
            self.show_phase("loading the endgame database that judges the games' endings (the first time it "
                            "builds the 4-piece one)")
            self._egdb = largest_available(should_stop=should_stop)
        return self._egdb

    def rate(self, checkpoint: Path, step: int, most: int | None = None, yardsticks: list[str] | None = None) -> int:
        """Rating games of a checkpoint against the yardsticks (gating.rating_yardsticks unless given; each match
        recorded as it ends): at most `most` of those still to play (all by default; see calibrate_yardsticks).
        Returns the number finished."""
        table = self._ratings()
        to_play = []
        for spec in self.cfg.rating_yardsticks if yardsticks is None else yardsticks:
            name = f"rating-{checkpoint.stem}-vs-{spec}"
            if name in table.recorded:
                self._close_journal(name)
            else:
                to_play.append((name, spec))
        if most is not None:
            to_play = to_play[:most]
        if not to_play:
            return 0
        player = self._network_player(checkpoint)
        info = PlayerInfo(player.name, "checkpoint", step, str(checkpoint))
        finished = 0
        for name, spec in to_play:
            if self._recorded_match(name, player, make_player(spec, self.cfg.seed), player.name, spec,
                                    self.cfg.seed + step, self.cfg.rating_games, most, info) is None:
                break
            finished += 1
        return finished

    def turn(self) -> bool:
        """One turn of the gatekeeper's work, the most urgent first: the gate of a waiting candidate (an
        interrupted match first, else the newest: next_candidate), else one match between gates. Returns
        whether there was work (False: nothing to do until a candidate comes)."""
        chosen = self.next_candidate()
        best = self.run.read_best()
        if chosen is not None:
            self.gate(chosen[1], chosen[0], best.path)  # it logs its decision as soon as it is taken
            return True
        return self.between_gates(best.path, best.step)

    def between_gates(self, best: Path, best_step: int) -> bool:
        """One match of the rating work that waits for no gate, played while no candidate waits: the rating
        of a decided candidate that a stop cut short, the yardsticks' calibration, then the best network's
        rating. So a first gate comes within minutes of the trainer's first candidate, not after a quarter
        of an hour of yardsticks. Returns whether there is more to do at once (a match finished, or a
        candidate came during one)."""
        played = (self.rate_owed(most=1) or self.calibrate_yardsticks(most=1)
                  or self.rate(best, best_step, most=1))
        return bool(played) or bool(self.pending_candidates())

    def owed_ratings(self) -> list[tuple[Path, int, list[str]]]:
        """Decided candidates still owed rating games: (checkpoint, step, yardsticks not yet played), oldest
        first. A gate's log line comes before its rating games and names their yardsticks; a stop during them
        leaves the rest owed (a candidate whose file is gone owes nothing)."""
        recorded = set(self._ratings().recorded)
        owed = []
        for entry in read_gating_log(self.run_dir):
            path = Path(entry["candidate"])
            missing = [spec for spec in entry.get("rating_yardsticks", ())
                       if f"rating-{path.stem}-vs-{spec}" not in recorded]
            if missing and path.exists():
                owed.append((path, int(entry["candidate_step"]), missing))
        return owed

    def rate_owed(self, most: int | None = None) -> int:
        """The owed rating games (owed_ratings), at most `most` matches of them; the candidates gating is then
        done with are removed. Returns the number of matches finished."""
        finished = 0
        for path, step, yardsticks in self.owed_ratings():
            played = self.rate(path, step, None if most is None else most - finished, yardsticks)
            finished += played
            if played < len(yardsticks) or (most is not None and finished >= most):
                break
        if finished:
            self.prune_candidates()
        return finished

    # -- gating ------------------------------------------------------------------------------------------
    def _network_player(self, checkpoint: Path) -> NetworkPlayer:
        evaluator = CachedEvaluator(Evaluator(load_checkpoint(checkpoint).build_network(), self.device),
                                    MATCH_CACHE_POSITIONS)
        return NetworkPlayer(checkpoint.stem, evaluator, self.cfg.simulations, self.cfg.search)

    def _journal(self, name: str, a: str, b: str) -> MatchJournal:
        return MatchJournal(self.run.match_journal(name), a, b)

    def _close_journal(self, name: str) -> None:
        """Once the match is recorded (and, for a gate, decided): a resume must not find it in progress."""
        self.run.match_journal(name).unlink(missing_ok=True)

    def _match(self, name: str, a, b, seed: int, games: int | None, parallel: int,
               on_game=None, should_stop=lambda _: False, done: MatchResult | None = None,
               may_start: Callable[[int], bool] | None = None) -> MatchResult:
        """A lockstep match that resumes from its journal (or from `done`, read from it already), writes
        each finished game to it, and aborts (raising GatingInterrupted) when the gatekeeper must stop;
        `may_start` as play_match's."""
        journal = self._journal(name, a.name, b.name)
        if done is None:
            done = journal.read(self.openings, self.rules)

        total = len(match_schedule(self.openings, games))

        def finished(game: MatchGame, result: MatchResult) -> None:
            journal.append(game, result)
            if on_game is not None:
                on_game(game, result)
            self._show_match(name, result, total)

        if done.games:
            log.info("%s: resuming after %d finished games", name, len(done.games))
        self._show_match(name, done, total)
        result = play_match(
            a, b, self.openings, self.rules, seed, games=games, parallel=parallel, on_game=finished,
            should_stop=lambda r: self.should_stop() or should_stop(r), done=done, may_start=may_start,
        )
        if self.should_stop():
            raise GatingInterrupted()
        return result

    def _show_match(self, name: str, result: MatchResult, total: int) -> None:
        """The match in progress, for the loop's status line (a gate's with its SPRT against its bounds)."""
        status = {"match": name, "games": len(result.games), "of": total, "wins": result.wins,
                  "draws": result.draws, "losses": result.losses}
        if self._sprt is not None:
            # The pairs counted so far (in ballot order, so fewer than the games suggest while an early
            # opening's game goes on); before min_pairs of them the LLR decides nothing.
            counted = len(self._sprt.pair_scores)
            status.update(pairs=counted, min_pairs=self._sprt.config.min_pairs,
                          llr=round(self._sprt.llr(), 2), llr_bounds=[round(self._sprt.lower_bound, 2),
                                                                      round(self._sprt.upper_bound, 2)],
                          # What the count waits for: the next pair's finished games, and the later
                          # openings' games finished before it.
                          next_pair_games=len(self._sprt.waiting.get(counted, ())),
                          games_waiting=sum(len(g) for k, g in self._sprt.waiting.items() if k != counted))
            if counted + self._window < total // 2:
                # Why the games stop coming while that pair's game goes on: none starts past the window.
                status.update(last_pair_to_start=counted + self._window)
        self.run.write_status("gatekeeper", status)

    def show_phase(self, phase: str) -> None:
        """What the gatekeeper does outside a match, for the loop's status line."""
        self.run.write_status("gatekeeper", {"phase": phase})

    def _save_match(self, result: MatchResult, name: str) -> Path:
        path = self.run.match_pdn(name)
        atomic_write_bytes(path, result.pdn().encode())
        return path

    def gate(self, candidate: Path, candidate_step: int, best: Path) -> dict:
        """Play candidate against best until the SPRT decides; promote on success. Returns the log entry. A
        candidate whose checkpoint does not load (one whose network answers NaN, say) is refused unplayed."""
        try:
            cand_player = self._network_player(candidate)
        except CheckpointError as exc:
            return self.refuse(candidate, candidate_step, exc)
        best_player = self._network_player(best)
        sprt = self._sprt = PairSprt(self.cfg.sprt)
        cuda = torch.cuda.is_available()
        window = self._window = self.cfg.gate_window(cuda)

        def count(result: MatchResult, i: int) -> None:
            sprt.add_game(result.opening_index[i], result.points_for_a(i))

        started = time.time()
        name = self.gate_name(candidate, best)
        done = self._journal(name, cand_player.name, best_player.name).read(self.openings, self.rules)
        for i in range(len(done.games)):  # the resumed games, in any order: the SPRT counts pairs in ballot order
            count(done, i)
        try:
            # The SPRT decides by its pair cap at the latest, so the match is the ballot's first max_pairs
            # openings: its status shows the real number of games, and no game starts that could not count.
            result = self._match(name, cand_player, best_player, self.cfg.seed + candidate_step,
                                 2 * self.cfg.sprt.max_pairs, self.cfg.games_in_flight(cuda),
                                 on_game=lambda _, r: count(r, len(r.games) - 1),
                                 should_stop=lambda _: sprt.decision() is not None, done=done,
                                 may_start=lambda opening: opening < len(sprt.pair_scores) + window)
        finally:
            self._sprt = None
        decision = sprt.final_decision()
        pdn_path = self._save_match(result, name)
        elo, low, high = sprt.elo_interval() if sprt.pair_scores else (0.0, 0.0, 0.0)
        # A gate is what a candidate waits for: nothing breaks off the database's build here (the ladder
        # between gates builds it first, unless a candidate came during that build).
        self._record(name, cand_player.name, best_player.name, result, self._endgame_database(None),
                     PlayerInfo(cand_player.name, "checkpoint", candidate_step, str(candidate)),
                     PlayerInfo(best_player.name, "checkpoint", load_checkpoint(best).step, str(best)))
        entry = {
            "candidate": str(candidate), "candidate_step": candidate_step, "best": str(best),
            "decision": decision, "games": len(result.games), "wins": result.wins, "draws": result.draws,
            "losses": result.losses, "pairs": len(sprt.pair_scores), "llr": round(sprt.llr(), 3),
            "elo": round(elo, 1), "elo_ci95": [round(low, 1), round(high, 1)], "pdn": str(pdn_path),
            "seconds": round(time.time() - started, 1),
            # The rating games come after this line: a stop during them leaves them owed (owed_ratings).
            "rating_yardsticks": list(self.cfg.rating_yardsticks),
        }
        # The decision is logged, and a winner promoted, as soon as the SPRT decides. When the candidate's
        # rating games (minutes on a CPU) came first, the console showed nothing of a decided gate meanwhile
        # (issue 76: its last game at 8.3 min, its decision at 10.6), and the actors kept the old best.
        if decision == "promote":
            self.run.write_best(candidate, candidate_step, f"won gating match {pdn_path.name}")
        append_gating_log(self.run_dir, entry)
        self._close_journal(name)
        log.info(self.decision_line(entry))
        self.rate(candidate, candidate_step)
        self.prune_candidates(keep=best)
        return entry

    def refuse(self, candidate: Path, step: int, problem: CheckpointError) -> dict:
        """Record a candidate that cannot play: never promoted, never rated, its file removed. Returns the log
        entry."""
        entry = {"candidate": str(candidate), "candidate_step": step, "decision": "refused", "reason": str(problem)}
        append_gating_log(self.run_dir, entry)
        log.info(self.decision_line(entry))
        self.prune_candidates()
        return entry

    @staticmethod
    def decision_line(entry: dict) -> str:
        """A gating decision as one log line: candidate, score, Elo interval, LLR, decision (a refusal's
        reason instead of the match)."""
        if entry["decision"] == "refused":
            return f"gate {Path(entry['candidate']).stem}: REFUSED, never promoted: {entry['reason']}"
        if entry["decision"] == "skipped":
            return f"gate {Path(entry['candidate']).stem}: skipped, a newer candidate came before its turn"
        low, high = entry["elo_ci95"]
        return (f"gate {Path(entry['candidate']).stem} vs {Path(entry['best']).stem}: "
                f"+{entry['wins']} ={entry['draws']} -{entry['losses']} in {entry['games']} games, "
                f"Elo {format_elo(entry['elo'])} ({format_elo_interval(low, high)}), LLR {entry['llr']:.2f}: "
                f"{entry['decision'].upper()}")

    @staticmethod
    def decision_lines(entries: list[dict]) -> list[str]:
        """Gating log entries as log lines (decision_line), each run of skipped candidates folded into one line:
        a trainer that wrote 20 candidates during a gate gave 20 lines of skips in one second."""
        lines: list[str] = []
        skipped: list[dict] = []
        for entry in [*entries, None]:
            if entry is not None and entry["decision"] == "skipped":
                skipped.append(entry)
                continue
            if len(skipped) == 1:
                lines.append(Gatekeeper.decision_line(skipped[0]))
            elif skipped:
                first, last = (Path(e["candidate"]).stem for e in (skipped[0], skipped[-1]))
                lines.append(f"gate: skipped {len(skipped)} candidates ({first} .. {last}): a newer one came "
                             f"before their turn")
            skipped = []
            if entry is not None:
                lines.append(Gatekeeper.decision_line(entry))
        return lines

    @staticmethod
    def gate_name(candidate: Path, best: Path) -> str:
        return f"gate-{candidate.stem}-vs-{best.stem}"

    def next_candidate(self) -> tuple[int, Path] | None:
        """The candidate to gate now: one whose match was interrupted (its finished games are kept), else the
        newest undecided one; the others are recorded as skipped."""
        pending = self.pending_candidates()
        if not pending:
            return None
        best = self.run.read_best().path
        started = [c for c in pending if self.run.match_journal(self.gate_name(c[1], best)).exists()]
        chosen = started[-1] if started else pending[-1]
        self.skip([(step, path) for step, path in pending if (step, path) != chosen and step < chosen[0]])
        return chosen

    def skip(self, candidates: list[tuple[int, Path]]) -> None:
        """Record candidates superseded by a newer one before their turn came: one write, one log line."""
        if not candidates:
            return
        entries = [{"candidate": str(path), "candidate_step": step, "decision": "skipped"} for step, path in candidates]
        append_gating_log(self.run_dir, *entries)
        for line in self.decision_lines(entries):
            log.info(line)
        self.prune_candidates()

    def prune_candidates(self, keep: Path | None = None) -> list[Path]:
        """Delete the candidate files gating is done with: those rejected, skipped or refused (their match,
        their ratings and their gating entry are kept in the run's records). Kept: candidates not decided yet (gating
        needs them), every promoted one (the chain of best networks that reports, `ship` and the model card
        name), the current best and `keep`. A candidate is 8.6 MB with its optimizer state, one every
        trainer.checkpoint_every steps; nothing reads a rejected or skipped one again."""
        entries = read_gating_log(self.run_dir)

        def named(decisions: tuple[str, ...]) -> set[Path]:
            return {Path(e["candidate"]).resolve() for e in entries if e["decision"] in decisions}

        best = self.run.read_best()
        kept = named(("promote",)) | {Path(p).resolve() for p in (best and best.path, keep) if p}
        kept |= {path.resolve() for path, _, _ in self.owed_ratings()}  # its rating games still to play
        done_with = named(("reject", "skipped", "refused")) - kept
        removed = [path for _, path in self.run.candidates() if path in done_with]
        for path in removed:
            path.unlink(missing_ok=True)
            cache_path(path).unlink(missing_ok=True)  # its int8 model (a reanalyser or a gate made it)
        if removed:
            log.info("removed the candidates gating is done with: %s", ", ".join(p.name for p in removed))
        return removed

    def pending_candidates(self) -> list[tuple[int, Path]]:
        """Candidates not yet decided, oldest first."""
        decided = {e["candidate"] for e in read_gating_log(self.run_dir)}
        return [(step, path) for step, path in self.run.candidates() if str(path) not in decided]

