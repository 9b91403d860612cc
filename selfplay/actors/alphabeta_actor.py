"""One self-play actor of the distilled player: bullet games of the alpha-beta search against itself, finished
games into the replay store (the same store, writer and commit protocol as the network's actors).

The distilled evaluation learns here from its own games, as the alpha-beta engines' evaluations did (Cake's
from its bullet matches, KingsRow's from hundreds of millions of positions of its own games): a game is cheap
(a fixed depth a move, a few thousand nodes), so a CPU plays millions of positions a day. Each game

* starts from a line of the opening book (`book_share` of games: the experts' moves, each drawn by how often
  they played it, for up to `book_plies` plies) or from a ballot opening, then a few random plies off it
  (`random_plies`), so that games differ;
* is played by the run's best distilled evaluation (the loop's best pointer, zero.run.rundir) at `depth` plies
  a move, ties broken by the game's seed;
* ends by the rules, or at its first position of the endgame database (`database_adjudication`) with the
  database's value: those positions are answered exactly by the player's search and never evaluated;
* keeps every position where a move was searched with the search's score (`root_value`, the side to move's
  expected score mapped to [-1, 1]) and the move played as its policy (the store's one policy slot).

Restarts lose nothing and count nothing twice: a game's seed is a function of (run seed, actor, index), and a
restarted actor goes on after the highest index committed (the writer's `next_seed_index`). SIGINT and SIGTERM
stop it after the game in play; a kill loses only the games not yet committed.
"""

from __future__ import annotations

import logging
import math
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from selfplay.actors.actor import game_seed, load_ballot
from selfplay.replay.records import POSITION_FIELDS, GameRecord, PositionRows, padded_policy
from zero.alphabeta import search as ab
from zero.alphabeta.player import DistilledPlayer
from zero.distilled.kernels import SCORE_UNITS
from zero.distilled.model import DistilledEval
from zero.net.encoding import move_action
from zero.rules.game import Game, Position, RulesConfig, Termination
from zero.run.config import MOST_SEED, check_settings, setting

log = logging.getLogger(__name__)


@dataclass
class AlphaBetaSelfPlayConfig:
    """How the distilled player plays its own games (`[selfplay]` of `checkers-zero distilled loop`)."""

    # Plies a move (iterative deepening to it, with the player's selectivity): 6 plays a game in about a
    # quarter of a second on one core, and one ply more is worth about +97 Elo at fixed depth (benchmarks/notes,
    # 2026-12-06 own games).
    depth: int = setting(6, low=1, high=ab.MAX_DEPTH)
    openings: str = "openings/acf_3move_144.txt"  # ballot file (relative to the data folder, or absolute)
    # Share of games that start from a line of the OCA opening book instead of a ballot opening: the experts'
    # openings, each move drawn by the games that played it, for 4 to `book_plies` plies (fewer where the
    # book ends).
    book_share: float = setting(0.5, low=0, high=1)
    book_plies: int = setting(16, low=4, high=60)
    # Random legal plies off the ballot opening, 0 to this many (uniform): 144 openings alone would repeat.
    random_plies: int = setting(4, low=0, high=40)
    database_adjudication: bool = True  # end a game at its first position of the largest database built
    seed: int = setting(84, low=0, high=MOST_SEED)
    commit_positions: int = setting(8192, low=1, high=1 << 20)  # positions a replay commit gathers
    rules: RulesConfig = field(default_factory=RulesConfig)

    def validate(self) -> None:
        check_settings(self)


def expected_score_value(score: int) -> float:
    """A search score (thousandths of a logit, or a proven result) as the side to move's value in [-1, 1]."""
    if abs(score) > ab.WIN_THRESHOLD:
        return 1.0 if score > 0 else -1.0
    return 2.0 / (1.0 + math.exp(-score / SCORE_UNITS)) - 1.0


class AlphaBetaActor:
    """Plays games of one evaluation and hands them to a replay writer (run_alphabeta_actor is the process)."""

    def __init__(self, config: AlphaBetaSelfPlayConfig, evaluation: DistilledEval, name: str, generation: int,
                 egdb=None) -> None:
        config.validate()
        self.config = config
        self.name = name
        self.generation = generation
        self.egdb = egdb
        self.openings = load_ballot(config.openings)
        self.book = None
        if config.book_share > 0:
            from zero.corpus.opening_book import ensure_book

            self.book = ensure_book()
        self.player = DistilledPlayer(depth=config.depth, evaluation=evaluation, egdb=egdb, seed=config.seed)

    def _book_line(self, rng: np.random.Generator) -> tuple[Position, list[str]]:
        """A line of the book from the start: each move drawn among the book's legal ones by their games."""
        pos, words = Position.initial(), []
        for _ in range(int(rng.integers(4, self.config.book_plies + 1))):
            legal = {(m.from_square, m.to_square, m.captured): m for m in pos.legal_moves()}
            entries = [(legal[key], e.games) for e in self.book.entries(pos)
                       if (key := (e.move_from, e.move_to, e.captured)) in legal]
            if not entries:
                break
            games = np.array([g for _, g in entries], np.float64)
            move = entries[int(rng.choice(len(entries), p=games / games.sum()))][0]
            pos = pos.play(move)
            words.append(str(move))
        return pos, words

    def _start(self, rng: np.random.Generator) -> tuple[Position, str]:
        """The game's first position: a line of the book or a ballot opening, and 0 to random_plies random
        legal plies off it."""
        pos, words = Position.initial(), []
        if self.book is not None and rng.random() < self.config.book_share:
            pos, words = self._book_line(rng)
        elif self.openings:
            opening = self.openings[int(rng.integers(len(self.openings)))]
            pos = opening.start
            for move in opening.replay():
                pos = pos.play(move)
            words = list(opening.moves)
        for _ in range(int(rng.integers(self.config.random_plies + 1))):
            legal = pos.legal_moves()
            if not legal:
                break
            move = legal[int(rng.integers(len(legal)))]
            pos = pos.play(move)
            words.append(str(move))
        return pos, " ".join(words) or "start"

    def _adjudicated(self, game: Game) -> bool:
        db = self.egdb
        if not self.config.database_adjudication or db is None or game.ply == 0 \
                or game.position.piece_count() > db.max_pieces:
            return False
        value = db.probe(game.position).value  # +1 win, 0 draw, -1 loss for the side to move
        game.finish((1 if game.position.black_to_move else -1) * value, Termination.DATABASE)
        return True

    def play_game(self, actor_id: int, seed_index: int) -> GameRecord | None:
        """The game of this seed index; None when its start has no move to search."""
        from zero.corpus.pdn import write_game

        seed = game_seed(self.config.seed, actor_id, seed_index)
        rng = np.random.default_rng(seed)
        start, opening = self._start(rng)
        game = Game(start, rules=self.config.rules)
        if game.outcome is not None:
            return None
        self.player.reset(seed)
        rows: dict[str, list] = {name: [] for name in POSITION_FIELDS}
        while game.outcome is None and not self._adjudicated(game):
            pos = game.position
            legal = game.legal_moves()
            move, score, _nodes = self.player.search(game)
            actions, shares = padded_policy(np.array([move_action(move, pos.black_to_move)], np.int16),
                                            np.ones(1, np.float32))
            for name, value in (("black", pos.black), ("white", pos.white), ("kings", pos.kings),
                                ("black_to_move", pos.black_to_move), ("no_progress", game.no_progress[-1]),
                                ("repetitions", game.repetitions()), ("ply", game.ply),
                                ("policy_actions", actions), ("policy_visits", shares),
                                ("full_search", True), ("forced", len(legal) == 1),
                                ("root_value", expected_score_value(score))):
                rows[name].append(value)
            game.play(move)
        if game.ply == 0:
            return None
        outcome = game.outcome
        pdn = write_game(game.moves, outcome.pdn_result, start=game.start, tags={
            "Event": "checkers-zero distilled self-play", "Round": str(seed), "Black": self.name,
            "White": self.name, "Opening": opening, "Termination": outcome.termination.value,
            "Search": f"depth {self.config.depth}"})
        return GameRecord(positions=PositionRows.from_lists(rows), winner=outcome.winner,
                          termination=outcome.termination.value, length=game.ply, opening=opening, pdn=pdn,
                          seed=seed, seed_index=seed_index, checkpoint=self.name, model_version=self.generation)


def run_alphabeta_actor(run_dir: str, actor_id: int, config: AlphaBetaSelfPlayConfig, evaluation_path: str,
                        generation: int, positions: int | None = None) -> None:
    """The actor process: plays the evaluation in `evaluation_path` (generation `generation`) until its group
    of the store holds `positions` committed positions (None: until stopped)."""
    from selfplay.replay.replay_buffer import ReplayWriter
    from zero.distilled.model import load_eval
    from zero.endgames.egdb_build import largest_available

    stop = {"now": False}

    def request_stop(*_):
        stop["now"] = True

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, request_stop)
    egdb = largest_available() if config.database_adjudication else None
    actor = AlphaBetaActor(config, load_eval(evaluation_path), Path(evaluation_path).stem, generation, egdb)
    started, played = time.monotonic(), 0
    with ReplayWriter(run_dir, actor_id, commit_positions=config.commit_positions) as writer:
        index = writer.next_seed_index
        while not stop["now"] and (positions is None
                                   or writer.committed_positions + writer.pending_positions < positions):
            record = actor.play_game(actor_id, index)
            index += 1
            if record is not None:
                writer.append_game(record)
                played += record.length
    log.info("actor %d: %d positions in %.0f s", actor_id, played, time.monotonic() - started)
