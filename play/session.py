"""A game between a person and the engine: what both front ends (terminal, browser) drive.

It keeps the rules' game, whose turn it is, the engine's strength and its last thinking, and the decisions
outside the rules (resignation, agreed draw), and writes the record as PDN.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Any

from play.analysis_json import analysis_json
from play.engine import Budget, Engine, side_name
from zero.rules.game import Game, Move, Outcome, Position, Termination
from zero.rules.notation import NotationError, fen_to_position, resolve_move


class PlayError(ValueError):
    """An action that is not possible now (not your turn, game over, nothing to undo): the message says why."""


def load_start(fen: str | None = None, pdn: str | Path | None = None) -> tuple[Position, list[Move]]:
    """The start position and moves already played: from a FEN, the first game of a PDN file, or the
    initial position. Raises PlayError with the reason when the FEN or file is bad."""
    if fen is not None and pdn is not None:
        raise PlayError("give either a FEN or a PDN file, not both")
    if fen is not None:
        try:
            return fen_to_position(fen), []
        except NotationError as exc:
            raise PlayError(str(exc)) from None
    if pdn is not None:
        from zero.corpus.pdn import PdnError, read_pdn

        try:
            first = next(iter(read_pdn(pdn)), None)
        except OSError as exc:
            raise PlayError(f"cannot read {pdn}: {exc}") from None
        if first is None:
            raise PlayError(f"no game in {pdn}")
        if isinstance(first, PdnError):
            raise PlayError(f"{pdn}: {first}")
        return first.start, list(first.moves)
    return Position.initial(), []


def new_game(start: Position, moves: list[Move]) -> Game:
    """The rules' game from a start and moves already played; PlayError when the moves go on past the
    end of the game by the rules (human records may play on after a repetition)."""
    game = Game(start=start)
    for ply, move in enumerate(moves):
        if game.outcome is not None:
            raise PlayError(f"the game ended by {game.outcome.termination.value} after ply {ply}, "
                            "but its record goes on")
        game.play(move)
    return game


class HumanGame:
    """The person plays one colour, the engine the other, from a start position (and moves already made)."""

    def __init__(self, engine: Engine, human_black: bool, budget: Budget, level: str | None = None,
                 start: Position | None = None, moves: list[Move] | tuple[Move, ...] = ()) -> None:
        self.engine = engine
        self.human_black = human_black
        self.budget = budget
        self.level = level  # the named level behind the budget, if any (shown to the player)
        # The strength behind each engine move, by its ply: the person may change the level during the game,
        # and the record must say what the engine's moves were played at.
        self.strengths: dict[int, str] = {}
        self.game = new_game(start or Position.initial(), list(moves))
        self.first_ply = self.game.ply  # moves before this came with the start and are not undone
        self.declared: Outcome | None = None  # resignation or agreed draw
        # The engine's search behind its last move (None for a forced move: there was no search).
        self.last_thinking: dict[str, Any] | None = None
        self.date = _dt.date.today()

    # ------------------------------------------------------------------------------------------ state

    @property
    def outcome(self) -> Outcome | None:
        return self.declared or self.game.outcome

    @property
    def over(self) -> bool:
        return self.outcome is not None

    @property
    def human_to_move(self) -> bool:
        return not self.over and self.game.position.black_to_move == self.human_black

    @property
    def engine_to_move(self) -> bool:
        return not self.over and self.game.position.black_to_move != self.human_black

    @property
    def strength(self) -> str:
        """The engine's level, or its budget where no level is named."""
        return self.level or str(self.budget)

    @property
    def last_move(self) -> Move | None:
        return self.game.moves[-1] if self.game.moves else None

    def status(self) -> str:
        """One line: whose move it is, or how the game ended."""
        outcome = self.outcome
        if outcome is None:
            side = side_name(self.game.position.black_to_move)
            return f"{side} to move ({'you' if self.human_to_move else 'engine'})"
        how = {
            Termination.NO_MOVES: f"{side_name(outcome.winner < 0)} has no legal move",
            Termination.REPETITION: "threefold repetition",
            Termination.NO_PROGRESS: "40 moves each without a capture or a man moved",
            Termination.MAX_LENGTH: "maximum game length",
            Termination.RESIGNATION: "resignation",
            Termination.AGREEMENT: "agreement",
            Termination.DATABASE: "endgame database",
        }[outcome.termination]
        if outcome.winner == 0:
            return f"draw by {how} ({outcome.pdn_result})"
        return f"{side_name(outcome.winner > 0)} wins: {how} ({outcome.pdn_result})"

    # ---------------------------------------------------------------------------------------- actions

    def _require_human_turn(self) -> None:
        if self.over:
            raise PlayError(f"the game is over: {self.status()}")
        if not self.human_to_move:
            raise PlayError("it is the engine's turn")

    def play_text(self, text: str) -> Move:
        """Play the person's move written in standard notation (a capture may give only its ends). Its mark
        must say what the move is, x for a capture and - for a step: a person who writes 12x16 expects a
        capture, and is told there is none rather than have a step played."""
        return self._play(text, strict_capture_mark=True)

    def play_path(self, path: list[int]) -> Move:
        """Play the person's move given as the squares it visits (from and to are enough when unambiguous)."""
        if len(path) < 2:
            raise PlayError("a move needs at least its start and end squares")
        # The squares say nothing of a capture: the notation reads '-' for one too.
        return self._play("-".join(str(sq) for sq in path), strict_capture_mark=False)

    def _play(self, text: str, strict_capture_mark: bool) -> Move:
        self._require_human_turn()
        # NotationError names the legal moves, or the move the text meant when only its mark is wrong.
        move = resolve_move(text, self.game.legal_moves(), strict_capture_mark=strict_capture_mark)
        self.game.play(move)
        return move

    def engine_move(self) -> Move:
        """Let the engine search and play its move; its thinking is kept in last_thinking (None after a
        forced move, which it plays without searching)."""
        if self.over:
            raise PlayError(f"the game is over: {self.status()}")
        if not self.engine_to_move:
            raise PlayError("it is your turn, not the engine's")
        move, analysis = self.engine.choose(self.game, self.budget)
        self.last_thinking = None if analysis is None else analysis_json(analysis, self.game.position,
                                                                          self.game.ply, top=5)
        self.strengths[self.game.ply] = self.strength
        self.game.play(move)
        return move

    def hint(self, top: int = 5) -> dict[str, Any]:
        """The engine's view of the person's position: its top moves with visit share and win/draw/loss."""
        self._require_human_turn()
        analysis = self.engine.analyse(self.game, self.budget)
        return analysis_json(analysis, self.game.position, self.game.ply, top=top)

    def undo(self) -> list[Move]:
        """Take back the person's last move and the engine's reply to it. After a resignation or an agreed
        draw, undo takes back that decision alone: the game reopens as it was before it, the person to move,
        no move taken back (the docs say so). Returns the moves taken back (latest first)."""
        if self.declared is not None:
            self.declared = None
            return []
        taken: list[Move] = []
        while self.game.ply > self.first_ply:
            mover_black = self.game.positions[-2].black_to_move
            taken.append(self.game.undo())
            if mover_black == self.human_black:
                self.last_thinking = None
                return taken
        for move in reversed(taken):  # no move of the person's to take back: leave the game as it was
            self.game.play(move)
        raise PlayError("no move of yours to take back")

    def offer_draw(self) -> tuple[bool, float]:
        """Offer the engine a draw; it accepts when its expected score is at most DRAW_ACCEPT_MAX_SCORE.
        Returns (accepted, the engine's expected score). A draw is offered on the person's own turn, as over
        the board: on the engine's, between the person's move and its reply, the engine would be asked to
        settle a position it has yet to move in."""
        self._require_human_turn()
        accepted, score = self.engine.accepts_draw(self.game, self.budget, engine_is_black=not self.human_black)
        if accepted:
            self.declared = Outcome(0, Termination.AGREEMENT)
        return accepted, score

    def resign(self) -> None:
        if self.over:
            raise PlayError(f"the game is over: {self.status()}")
        self.declared = Outcome(-1 if self.human_black else 1, Termination.RESIGNATION)

    # ----------------------------------------------------------------------------------------- record

    @property
    def result(self) -> str:
        return self.outcome.pdn_result if self.outcome else "*"

    def pdn(self) -> str:
        """The record as PDN. The engine's name gives every level its moves were played at; when there are
        several, a comment marks the engine move where each one began."""
        from zero.corpus.pdn import write_game

        # Undone moves are no part of the record; a move played again after an undo replaced its entry.
        played = sorted((ply, strength) for ply, strength in self.strengths.items() if ply < self.game.ply)
        used = list(dict.fromkeys(strength for _, strength in played)) or [self.strength]
        engine = f"{self.engine.name} ({', '.join(used)})"
        comments: list[str | None] | None = None
        if len(used) > 1:
            comments = [None] * self.game.ply
            previous = None
            for ply, strength in played:
                if strength != previous:
                    comments[ply] = f"engine at {strength} from here"
                previous = strength
        tags = {
            "Event": "checkers-zero play",
            "Site": "local",
            "Date": self.date.strftime("%Y.%m.%d"),
            "Black": "Human" if self.human_black else engine,
            "White": engine if self.human_black else "Human",
        }
        return write_game(self.game.moves, self.result, tags, start=self.game.start, comments=comments)
