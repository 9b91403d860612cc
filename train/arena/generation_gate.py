"""The gate of the distilled player's generations: a candidate evaluation against the run's best, by the
alpha-beta player at a bullet budget, decided by the SPRT on game pairs (train.arena.sprt) that gates the
network's checkpoints, then confirmed the same way at the match budget (0.1 s a move on a game clock).

The ballot is played in rounds of `round_openings` openings (each with both colours), split over `processes`
processes of one thread (train.arena.split_match); after each round the SPRT takes its pairs in ballot order
and decides, or asks for another round. Each finished round's pair scores are appended to a journal in the run
directory, so a gate killed at any moment replays only the round it was in: a player at a fixed depth plays a
game as a function of its seed, and one on the clock as reproducibly as the clock.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from train.arena.gating import GatingInterrupted, read_gating_log
from train.arena.split_match import play_split_match, worker_pool
from train.arena.sprt import PairSprt, SprtConfig
from zero.run.config import MOST_PROCESSES, append_line_durably, check_settings, setting
from zero.run.rundir import RunDir


GATE_ENTRY = "distilled-generation"  # the gating log's kind of entry for a generation gate's decisions


def generation_decisions(run_dir: Path) -> list[dict]:
    """The decisions of the run's generation gates, oldest first (its gating log's GATE_ENTRY entries)."""
    return [e for e in read_gating_log(run_dir) if e.get("kind") == GATE_ENTRY]


@dataclass
class GenerationGateConfig:
    """How a candidate generation is judged against the best (`[gate]` of `checkers-zero distilled loop`)."""

    # The bullet stage's budget as a player spec gives it: plies a move ("6") or a clock ("t0+0.02").
    budget: str = "6"
    # The confirmation stage's budget; "" for none. A candidate is promoted only when both stages promote it.
    confirm_budget: str = "t0+0.1"
    openings: str = "openings/acf_3move_144.txt"  # ballot file (relative to the data folder, or absolute)
    round_openings: int = setting(24, low=1, high=10_000)  # openings a round, both colours each
    processes: int = setting(2, low=1, high=MOST_PROCESSES)
    sprt: SprtConfig = field(default_factory=SprtConfig)
    # The confirmation asks only that the candidate be no weaker at the match budget (H0 -20, H1 +10, the pair
    # cap's interval rule promoting above -20; its own caps and errors, by default as the bullet stage's), the
    # bullet stage having shown it stronger. Against H1 +40 there,
    # the candidates of the loop's cycles 3 to 5, +33 to +58 at 6 plies, played -19, +5 and +12 at 0.1 s and
    # were all rejected, so that no gain accumulated: each cycle trained again from generation 1.
    confirm_sprt: SprtConfig = field(default_factory=lambda: SprtConfig(elo0=-20.0, elo1=10.0))

    def validate(self) -> None:
        check_settings(self)
        if not self.budget:
            raise ValueError("gate.budget: the bullet stage needs a budget, e.g. \"6\" (plies a move)")


@dataclass
class StageResult:
    """One stage of a gate: its decision, Elo estimate and interval, and the pairs it took."""

    budget: str
    decision: str  # "promote" or "reject"
    pairs: int
    elo: float
    low: float
    high: float

    def line(self) -> str:
        return (f"{self.budget}: {self.decision} after {self.pairs} pairs, Elo {self.elo:+.0f} "
                f"({self.low:+.0f} .. {self.high:+.0f})")


def _spec(evaluation: Path, budget: str, pieces: int) -> str:
    return f"distilled:{evaluation}:{budget}:db{pieces}"


def _database_pieces() -> int:
    """The largest endgame database built, said once a stage: a spec's bare `:db` said it again for each
    player of each worker of each round (four lines a round in the loop's console)."""
    from zero.endgames.egdb_build import largest_available, say_which_database

    return say_which_database(largest_available()).max_pieces


def _read_rounds(path: Path) -> dict[int, list[float]]:
    """Finished rounds (round -> pair scores) of a gate in progress; a line torn by a crash ends the reading."""
    rounds: dict[int, list[float]] = {}
    if not path.exists():
        return rounds
    for line in path.read_text().splitlines():
        try:
            entry = json.loads(line)
            rounds[int(entry["round"])] = [float(p) for p in entry["pairs"]]
        except (ValueError, KeyError, TypeError):
            break
    return rounds


def _append_round(path: Path, index: int, pairs: list[float]) -> None:
    append_line_durably(path, json.dumps({"round": index, "pairs": pairs}) + "\n")


def play_stage(run_dir: Path, name: str, candidate: Path, best: Path, budget: str, config: GenerationGateConfig,
               report: Callable[[str], None] = print, stopping: Callable[[], bool] = lambda: False,
               sprt_config: SprtConfig | None = None) -> StageResult:
    """The candidate against the best at `budget` until the SPRT (`sprt_config`, by default config.sprt)
    decides (or the ballot, up to the pair cap, runs out: then the interval rule). `name` names the stage's
    journal (one per candidate and stage). GatingInterrupted when `stopping()` says so before a round."""
    from selfplay.actors.actor import load_ballot

    sprt_config = sprt_config or config.sprt
    run = RunDir(run_dir)
    openings = load_ballot(config.openings)[:sprt_config.max_pairs]
    journal = run.match_journal(name)
    done = _read_rounds(journal)
    sprt = PairSprt(sprt_config)
    step = config.round_openings
    decision = None
    with contextlib.ExitStack() as stack:
        pool = None  # one for the stage's rounds, started for the first round to play: a start costs seconds
        pieces = None
        for index, first in enumerate(range(0, len(openings), step)):
            pairs = done.get(index)
            if pairs is None:
                if stopping():
                    raise GatingInterrupted(name)
                pool = pool or stack.enter_context(worker_pool(config.processes))
                pieces = pieces or _database_pieces()
                result = play_split_match(_spec(candidate, budget, pieces), _spec(best, budget, pieces),
                                          openings[first:first + step], config.processes, seed=index, pool=pool)
                by_opening: dict[int, float] = {}
                for game, opening in enumerate(result.opening_index):
                    by_opening[opening] = by_opening.get(opening, 0.0) + result.points_for_a(game)
                pairs = [by_opening[k] for k in sorted(by_opening)]
                _append_round(journal, index, pairs)
            for points in pairs:
                sprt.add_pair(points)
            elo, low, high = sprt.elo_interval()
            report(f"gate {name}: {len(sprt.pair_scores)} pairs, LLR {sprt.llr():+.2f} "
                   f"({sprt.lower_bound:+.2f} .. {sprt.upper_bound:+.2f}), Elo {elo:+.0f} ({low:+.0f} .. {high:+.0f})")
            decision = sprt.decision()
            if decision:
                break
    decision = decision or sprt.final_decision()
    elo, low, high = sprt.elo_interval()
    return StageResult(budget, decision, len(sprt.pair_scores), elo, low, high)


def gate(run_dir: Path, cycle: int, candidate: Path, best: Path, config: GenerationGateConfig,
         report: Callable[[str], None] = print, stopping: Callable[[], bool] = lambda: False) -> list[StageResult]:
    """Every stage of the gate of cycle `cycle`'s candidate, stopping at the first that rejects it."""
    config.validate()
    stages = []
    for stage, budget, sprt in (("bullet", config.budget, config.sprt),
                                ("confirm", config.confirm_budget, config.confirm_sprt)):
        if not budget:
            continue
        result = play_stage(run_dir, f"generation-gate-{cycle:04d}-{stage}", candidate, best, budget, config,
                            report, stopping, sprt)
        stages.append(result)
        if result.decision != "promote":
            break
    return stages
