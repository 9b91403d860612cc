"""Game review: every position of a game analysed by the engine, every move judged by what it cost.

A move's cost is the fall in the mover's expected score (win + draw/2, from 0 to 1): the score of the
position before the move, minus the score the mover keeps after it (1 - the opponent's score there).
The search's value is an estimate with noise, so small falls are ignored and a move that was forced (the
only legal move) is never marked or counted, nor is a move of the ballot opening a match game started from
(its Opening tag names those forced moves: zero.corpus.openings.ballot_plies). Where the analysis carries a
`proven` value (terminal lines today; endgame databases and the MCTS-solver fill it) that exact value
replaces the estimate, and a position the rules have already ended (no move, repetition, no progress) is
scored exactly.

All positions of all games go to the engine as protocol queries (one per game, `analyze_plies`), so many
positions are searched together in one batched search.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from zero.corpus.openings import ballot_plies
from zero.corpus.pdn import PdnGame, write_game
from zero.rules.game import Game, Move, Outcome, RulesConfig, Termination

if TYPE_CHECKING:  # the engine loads torch; review's pure parts do not need it
    from play.api import Engine

PROVEN_SCORE = {"win": 1.0, "draw": 0.5, "loss": 0.0}


@dataclass(frozen=True)
class ReviewSettings:
    """How moves are judged. Falls are in expected-score points (0 to 1; a draw thrown into a loss is 0.5)."""

    mistake: float = 0.10  # a fall of at least this marks a move `?` (about a tenth of a game point)
    blunder: float = 0.25  # a fall of at least this marks it `??` (half-way from a draw to a loss)

    def validate(self) -> None:
        if not 0 < self.mistake <= self.blunder <= 1:
            raise ValueError(f"need 0 < mistake <= blunder <= 1, not mistake {self.mistake}, blunder {self.blunder}")


def move_accuracy(fall: float) -> float:
    """Accuracy of one move in percent from its fall in expected score: Lichess's move accuracy
    (103.1668 * exp(-0.04354 * fall in percentage points) - 3.1669, clipped to 0..100): about 100 for a move
    that keeps the score, about 65 for a fall of 0.1, about 30 for 0.25."""
    return min(100.0, max(0.0, 103.1668 * math.exp(-4.354 * fall) - 3.1669))


@dataclass
class MoveReview:
    move: Move
    black: bool  # played by Black
    forced: bool  # the only legal move
    fall: float | None  # in the mover's expected score; None where the position after it was not analysed
    mark: str  # "", "?" or "??"
    comment: str


@dataclass
class GameReview:
    game: PdnGame
    moves: list[MoveReview]
    ended_by_rule: Outcome | None  # the rules ended the game before its recorded end (players went on)
    ballot: int  # first plies forced by the ballot opening: no player chose them, so none is judged
    # The engine's answer for each analysed ply (play.analysis_json's shape) and the expected score of the
    # side to move at each judged ply (exact where the rules or a proof fix it): what the browser draws.
    answers: dict[int, dict[str, Any]] = field(default_factory=dict)
    scores: dict[int, float] = field(default_factory=dict)

    def pdn(self, annotator: str) -> str:
        tags = dict(self.game.tags)
        tags["Annotator"] = annotator
        for black, colour in ((True, "Black"), (False, "White")):
            accuracy = self.accuracy(black)
            if accuracy is not None:
                tags[f"{colour}Accuracy"] = f"{accuracy:.1f}"
        return write_game(self.game.moves, self.game.result, tags, self.game.start,
                          marks=[m.mark for m in self.moves], comments=[m.comment or None for m in self.moves])

    def json(self) -> dict[str, Any]:
        """The review as JSON-ready data for the browser: per move its judgement, per ply the engine's answer
        (play.analysis_json's shape, null where none) and Black's expected score (the graph's one side)."""
        black_at = [self.game.start.black_to_move == (ply % 2 == 0) for ply in range(self.game.plies + 1)]
        moves = []
        for ply, m in enumerate(self.moves):
            answer = self.answers.get(ply)
            moves.append({"move": str(m.move), "side": "black" if m.black else "white", "forced": m.forced,
                          "fall": None if m.fall is None else round(m.fall, 4), "mark": m.mark,
                          "best": None if answer is None or m.forced else answer["move"],
                          "line": None if answer is None or m.forced else answer.get("pv"),
                          "comment": m.comment})
        return {
            "tags": self.game.tags,
            "result": self.game.result,
            "fen": self.game.start.fen(),
            "ballot": self.ballot,
            "ended_by_rule": None if self.ended_by_rule is None else self.ended_by_rule.termination.value,
            "accuracy": {"black": self.accuracy(True), "white": self.accuracy(False)},
            "scores": [None if ply not in self.scores else
                       round(self.scores[ply] if black_at[ply] else 1 - self.scores[ply], 4)
                       for ply in range(self.game.plies + 1)],
            "positions": [self.answers.get(ply) for ply in range(self.game.plies + 1)],
            "moves": moves,
        }

    def judged(self, black: bool) -> list[MoveReview]:
        """The moves of one side that are judged: analysed on both sides and not forced."""
        return [m for m in self.moves if m.black == black and m.fall is not None and not m.forced]

    def accuracy(self, black: bool) -> float | None:
        judged = self.judged(black)
        return sum(move_accuracy(m.fall) for m in judged) / len(judged) if judged else None


@dataclass
class GamePlan:
    """What the engine is asked about one game: the plies it can analyse (the rules may end a recorded
    game early: human players go on past a threefold repetition) and how the rest is scored."""

    game: PdnGame
    replay: Game  # replayed under the engine's rules up to where they end it
    ballot: int  # the first plies, forced by the ballot opening
    plies: list[int]  # positions to analyse: every ply of the replay after the ballot not ended by the rules

    def query(self, limits: dict[str, Any]) -> dict[str, Any]:
        return {"id": self.game.index, "fen": self.game.start.fen(), "moves": [str(m) for m in self.replay.moves],
                "analyze_plies": self.plies, "top": 1, "pv": False, "wdl": False, **limits}


def plan(game: PdnGame, rules: RulesConfig) -> GamePlan:
    replay = Game(start=game.start, rules=rules)
    for move in game.moves:
        if replay.outcome is not None:
            break
        replay.play(move)
    over = replay.outcome is not None
    ballot = min(ballot_plies(game.tags.get("Opening", ""), game.start, game.moves), replay.ply)
    return GamePlan(game, replay, ballot, list(range(ballot, replay.ply + (0 if over else 1))))


def review_game(plan: GamePlan, answers: dict[int, dict[str, Any]], settings: ReviewSettings) -> GameReview:
    """The review of a planned game from the engine's answers, one per planned ply."""
    replay = plan.replay
    scores = {ply: _score(answers.get(ply), replay, ply) for ply in range(plan.ballot, replay.ply + 1)}
    moves = []
    for ply, move in enumerate(plan.game.moves):
        black = plan.game.start.black_to_move == (ply % 2 == 0)
        if ply < plan.ballot:
            ends = ply == plan.ballot - 1
            comment = f"end of the ballot opening; {_evaluation(answers.get(ply + 1), replay, ply + 1)}" if ends else ""
            moves.append(MoveReview(move, black, False, None, "", comment))
            continue
        if ply >= replay.ply:  # after the rules ended the game
            moves.append(MoveReview(move, black, False, None, "", ""))
            continue
        forced = len(replay.positions[ply].legal_moves()) == 1
        fall = max(0.0, scores[ply] - (1 - scores[ply + 1]))
        mark = "" if forced else "??" if fall >= settings.blunder else "?" if fall >= settings.mistake else ""
        parts = [_evaluation(answers.get(ply + 1), replay, ply + 1)]
        best = answers[ply]["move"]
        if best != str(move) and not forced:
            parts.append(f"best {best}")
        if mark:
            kind = "blunder" if mark == "??" else "mistake"
            parts.append(f"{kind}: {'Black' if black else 'White'} loses {fall:.2f} of expected score")
        moves.append(MoveReview(move, black, forced, fall, mark, "; ".join(parts)))
    ended_early = replay.outcome if replay.ply < plan.game.plies else None
    if ended_early is not None:
        moves[replay.ply - 1].comment += "; the game went on after this"
    return GameReview(plan.game, moves, ended_early, plan.ballot, answers, scores)


def _score(answer: dict[str, Any] | None, replay: Game, ply: int) -> float:
    """Expected score of the side to move at `ply`: exact where the rules ended the game or the search
    proved the value, else the search's estimate."""
    if answer is None:  # only the last position can be unanalysed: the rules ended the game there
        return 0.0 if replay.outcome.termination == Termination.NO_MOVES else 0.5
    if answer["proven"] is not None:
        return PROVEN_SCORE[answer["proven"]["value"]]
    return float(answer["score"])


def _evaluation(answer: dict[str, Any] | None, replay: Game, ply: int) -> str:
    """The position after a move in words, for Black (the first player), as comments are read in order."""
    if answer is None:
        outcome = replay.outcome
        if outcome.termination == Termination.NO_MOVES:
            return f"{'Black' if outcome.winner > 0 else 'White'} wins: no move left for the other side"
        return {Termination.REPETITION: "draw by threefold repetition",
                Termination.NO_PROGRESS: "draw: 40 moves each without a capture or a man moved"}[outcome.termination]
    black_to_move = answer["side"] == "black"
    if answer["proven"] is not None:
        value = answer["proven"]["value"]
        for_black = value if black_to_move else {"win": "loss", "loss": "win", "draw": "draw"}[value]
        plies = f" in {answer['proven']['plies']} plies" if for_black != "draw" else ""
        return f"Black: proven {for_black}{plies}"
    wdl = answer["wdl"]
    win, draw, loss = (wdl["win"], wdl["draw"], wdl["loss"]) if black_to_move else (wdl["loss"], wdl["draw"], wdl["win"])
    return f"Black win {100 * win:.0f}% draw {100 * draw:.0f}% loss {100 * loss:.0f}%, score {win + draw / 2:.2f}"


@dataclass
class PlayerSummary:
    name: str
    games: int = 0
    moves: int = 0  # judged moves
    accuracy_sum: float = 0.0
    mistakes: int = 0
    blunders: int = 0

    @property
    def accuracy(self) -> float | None:
        return self.accuracy_sum / self.moves if self.moves else None


@dataclass
class ReviewSummary:
    players: dict[str, PlayerSummary] = field(default_factory=dict)

    def add(self, review: GameReview) -> None:
        for black, colour in ((True, "Black"), (False, "White")):
            name = review.game.tags.get(colour, "").strip() or colour
            player = self.players.setdefault(name, PlayerSummary(name))
            player.games += 1
            for m in review.judged(black):
                player.moves += 1
                player.accuracy_sum += move_accuracy(m.fall)
                player.mistakes += m.mark == "?"
                player.blunders += m.mark == "??"

    def table(self) -> str:
        rows = sorted(self.players.values(), key=lambda p: (-p.games, p.name))
        width = max([len(p.name) for p in rows] + [6])
        lines = [f"{'player':<{width}}  {'games':>5}  {'moves':>5}  {'accuracy':>8}  {'mistakes':>8}  {'blunders':>8}"]
        for p in rows:
            accuracy = f"{p.accuracy:.1f}" if p.accuracy is not None else "-"
            lines.append(f"{p.name:<{width}}  {p.games:>5}  {p.moves:>5}  {accuracy:>8}  {p.mistakes:>8}  {p.blunders:>8}")
        return "\n".join(lines)


def review_games(engine: Engine, games: Iterable[PdnGame], limits: dict[str, Any], settings: ReviewSettings,
                 on_position: Callable[[], None] = lambda: None) -> Iterator[GameReview | tuple[PdnGame, str]]:
    """Reviews of the games in their order, each as soon as it and those before it are done; a game the
    engine refuses comes as (game, the engine's message). `limits` are the protocol's (simulations, time,
    nodes; and pv, for the best move's line in each answer); `on_position` is called once per analysed position (a progress bar)."""
    settings.validate()
    plans: dict[int, GamePlan] = {}
    order: deque[int] = deque()  # games not yet yielded, in file order
    answers: dict[int, dict[int, dict[str, Any]]] = {}
    failed: dict[int, str] = {}

    def queries() -> Iterator[dict[str, Any]]:
        for game in games:
            p = plan(game, engine.settings.rules)
            plans[game.index] = p
            order.append(game.index)
            answers[game.index] = {}
            if p.plies:
                yield p.query(limits)

    def finished(index: int) -> bool:
        return index in failed or len(answers[index]) == len(plans[index].plies)

    def done_in_order() -> Iterator[GameReview | tuple[PdnGame, str]]:
        while order and finished(order[0]):
            index = order.popleft()
            game_plan = plans.pop(index)
            if index in failed:
                yield game_plan.game, failed.pop(index)
            else:
                yield review_game(game_plan, answers.pop(index), settings)

    for reply in engine.answers(queries()):
        if "error" in reply:
            failed[reply["id"]] = reply["error"]
        else:
            answers[reply["id"]][reply["ply"]] = reply
            on_position()
        yield from done_in_order()
    yield from done_in_order()  # games with nothing to analyse, read after the last answer
