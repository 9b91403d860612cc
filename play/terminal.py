"""Playing against a checkpoint in the terminal (`checkers-zero play`, play.cli.play).

The board is drawn with the person's pieces at the bottom, next to a key of the square numbers; moves are
typed in standard notation. Reads commands line by line, so it works as well with a pipe as with a person.
"""

from __future__ import annotations

import datetime as _dt
import os
from pathlib import Path
from typing import Any, TextIO

from play.engine import LEVELS, EngineError, budget_for
from play.session import HumanGame, PlayError
from zero.rules.bitboard import square_rc
from zero.rules.game import Move, Position
from zero.rules.notation import NotationError

HELP = """\
Commands:
  11-15, 22x15, 26x17x10x1   play a move: - for a step, x for a capture (which may give only its ends: 26x1)
  moves                      list your legal moves
  hint                       the engine's view of your position: its best moves and their win/draw/loss
  undo                       take back your last move (and the engine's reply); after a draw agreed or
                             your resignation, reopen the game as it was before it, taking back no move
  draw                       offer a draw: the engine accepts unless it expects to score more than 55%
  resign                     give up the game
  level NAME                 change the engine's strength ({levels})
  analysis [on|off]          show the engine's search after each of its moves (off: it gives away lines)
  save [FILE]                write the game as PDN (default: {default})
  board                      show the board again
  help                       this list
  quit                       leave (the game is saved first; so is Ctrl-C, after asking)"""



def board_text(position: Position, last_move: Move | None = None, black_at_bottom: bool = True) -> str:
    """The board as text: pieces (b, w men; B, W kings) beside the square numbers, same orientation.
    The squares of the last move are marked with * in the key."""
    marked = set(last_move.path) if last_move else set()
    grid: dict[tuple[int, int], int] = {square_rc(sq): sq for sq in range(1, 33)}
    rows = range(7, -1, -1) if black_at_bottom else range(8)
    cols = list(range(7, -1, -1) if black_at_bottom else range(8))
    top, bottom = ("White", "Black") if black_at_bottom else ("Black", "White")
    lines = [f"      {top}", "   +-----------------+     +---------------------------------+"]
    for r in rows:
        pieces, numbers = [], []
        for c in cols:
            sq = grid.get((r, c))
            if sq is None:
                pieces.append(" ")
                numbers.append("    ")
            else:
                pieces.append(position.piece_at(sq) or ".")
                numbers.append(f"{sq:>3}{'*' if sq in marked else ' '}")
        lines.append(f"   | {' '.join(pieces)} |     |{''.join(numbers)} |")
    lines.append("   +-----------------+     +---------------------------------+")
    lines.append(f"      {bottom}")
    return "\n".join(lines)


def _percent(wdl: dict[str, float] | None) -> str:
    if wdl is None:
        return "not searched"
    win, draw, loss = (round(100 * wdl[k]) for k in ("win", "draw", "loss"))
    return f"win {win}% draw {draw}% loss {loss}%"


def thinking_text(thinking: dict[str, Any], whose: str) -> str:
    """The engine's search as a small table: move, visit share, prior, win/draw/loss (the alpha-beta engine: its
    depth and nodes, and its best move's win/draw/loss); then the main line."""
    value = f"proven {thinking['proven']['text']}" if thinking["proven"] else _percent(thinking["wdl"])
    by_depth = thinking["depth"] is not None
    effort = (f"depth {thinking['depth']}, {thinking['nodes']:,} nodes in {thinking['seconds']:.2f} s" if by_depth
              else f"{thinking['simulations']} simulations")
    lines = [f"  {effort}; {whose}: {value}"
             + (f"; about {thinking['plies_left']:.0f} plies left" if thinking.get("plies_left") is not None else "")]
    for stat in thinking["moves"]:
        visits = "" if by_depth else f"{100 * stat['share']:5.1f}% of visits  prior {100 * stat['prior']:4.1f}%  "
        lines.append(f"  {stat['move']:<14} {visits}"
                     + (f"proven {stat['proven']['text']}" if stat["proven"] else _percent(stat["wdl"])))
    if thinking["pv"]:
        lines.append(f"  main line: {' '.join(thinking['pv'])}")
    return "\n".join(lines)


class TerminalGame:
    """The read-eval-print loop around a HumanGame."""

    def __init__(self, session: HumanGame, save_path: Path, out: TextIO, show_analysis: bool = False) -> None:
        self.session = session
        self.save_path = save_path
        self.out = out
        # Off by default: the engine's main line includes the person's best reply.
        self.show_analysis = show_analysis
        self.saved_ply: int | None = None  # ply count (and outcome) of the last save, to save once per change
        self.saved_result: str | None = None

    def say(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)

    def show_board(self) -> None:
        s = self.session
        self.say()
        self.say(board_text(s.game.position, s.last_move, black_at_bottom=s.human_black))
        if s.last_move is not None:
            self.say(f"Last move: {s.last_move}")
        self.say(f"Game over: {s.status()}" if s.over else s.status())

    def save(self, path: Path | None = None) -> None:
        target = path or self.save_path
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(self.session.pdn(), encoding="utf-8")
        except OSError as exc:
            self.say(f"could not save to {target}: {exc}")
            return
        if path is None:
            self.saved_ply, self.saved_result = self.session.game.ply, self.session.result
        self.say(f"Game saved to {target}")

    def unsaved(self) -> bool:
        s = self.session
        changed = (s.game.ply, s.result) != (self.saved_ply, self.saved_result)
        return changed and (s.game.ply > s.first_ply or s.over)

    def engine_turn(self) -> None:
        s = self.session
        self.say(f"Engine thinking ({s.budget})...")
        forced = len(s.game.legal_moves()) == 1
        move = s.engine_move()
        unsearched = " (forced: its only legal move)" if forced else " (the opening book's move)"
        self.say(f"Engine plays {move}" + (unsearched if s.last_thinking is None else ""))
        if self.show_analysis and s.last_thinking is not None:
            self.say(thinking_text(s.last_thinking, "engine's view"))

    def command(self, line: str) -> bool:
        """Carry out one input line; False means leave."""
        s = self.session
        line = line.strip()
        word, _, rest = line.partition(" ")
        word, rest = word.lower(), rest.strip()
        if word in ("quit", "exit", "q"):
            return False
        if word in ("help", "?"):
            self.say(HELP.format(levels=", ".join(LEVELS), default=self.save_path))
        elif word == "board":
            self.show_board()
        elif word == "moves":
            self.say("Legal moves: " + (", ".join(str(mv) for mv in s.game.legal_moves()) or "none"))
        elif word == "save":
            self.save(Path(rest) if rest else None)
        elif word == "undo":
            taken = s.undo()
            self.say(f"Taken back: {', '.join(str(mv) for mv in taken)}" if taken else "Game reopened.")
            self.show_board()
        elif word == "hint":
            self.say("Hint:")
            self.say(thinking_text(s.hint(), "your view"))
        elif word == "draw":
            accepted, score = s.offer_draw()
            verdict = "accepts" if accepted else "declines"
            self.say(f"The engine {verdict} the draw (it expects to score {100 * score:.0f}%).")
        elif word == "resign":
            s.resign()
            self.say("You resign.")
        elif word == "analysis":
            if rest not in ("", "on", "off"):
                self.say("analysis takes on or off")
            else:
                self.show_analysis = rest == "on" if rest else not self.show_analysis
                self.say(f"Analysis after engine moves: {'on' if self.show_analysis else 'off'}.")
        elif word == "level":
            if rest not in LEVELS:
                self.say(f"unknown level {rest!r}; levels: {', '.join(LEVELS)}")
            else:
                s.level, s.budget = rest, budget_for(rest, kind=s.engine.kind)
                self.say(f"Level {rest}: {s.budget} per move.")
        elif not word:
            pass
        elif s.over:
            self.say(f"The game is over ({s.status()}). Type undo, save [FILE] or quit.")
        else:
            move = s.play_text(line)
            self.say(f"You play {move}")
        return True

    def loop(self, lines: TextIO) -> None:
        """Play until quit or the end of input, saving an unsaved game on the way out; Ctrl-C offers to."""
        try:
            self._play(lines)
        except KeyboardInterrupt:
            self.say("\nInterrupted.")
            if self.unsaved():
                self._offer_to_save(lines)
            return
        if self.unsaved():
            self.save()

    def _offer_to_save(self, lines: TextIO) -> None:
        self.out.write(f"Save the game to {self.save_path}? [Y/n] ")
        self.out.flush()
        try:
            answer = lines.readline().strip().lower()
        except KeyboardInterrupt:  # a second Ctrl-C: leave at once
            self.say("\nNot saved.")
            return
        if answer.startswith("n"):
            self.say("Not saved.")
        else:
            self.save()

    def _play(self, lines: TextIO) -> None:
        s = self.session
        self.show_board()
        reported_end = False
        while True:
            if s.engine_to_move:
                self.engine_turn()
                self.show_board()
                continue
            if s.over and not reported_end:
                self.show_board()
                self.save()
                self.say("Type undo to take back, save FILE to save elsewhere, or quit.")
                reported_end = True
            elif not s.over:
                reported_end = False
            self.out.write(f"{'game over' if s.over else 'your move'}> ")
            self.out.flush()
            line = lines.readline()
            if not line:  # end of input
                break
            try:
                if not self.command(line):
                    break
            except (NotationError, PlayError, EngineError) as exc:
                self.say(str(exc))


def games_folder() -> Path:
    """Where games are saved unless a file is named: $CHECKERS_ZERO_GAMES, else the user's data folder."""
    if os.environ.get("CHECKERS_ZERO_GAMES"):
        return Path(os.environ["CHECKERS_ZERO_GAMES"])
    data_home = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return data_home / "checkers-zero" / "games"


def default_save_path() -> Path:
    return (games_folder() / f"checkers-zero-{_dt.datetime.now():%Y%m%d-%H%M%S}.pdn").absolute()


