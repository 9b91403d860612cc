"""A program that speaks the JSON engine protocol (`play/ENGINE_PROTOCOL.md`) as a match player: another
checkers-zero (another version, network or setting) or any engine with that protocol, run as a child
process and asked for each move with the game so far, as a program playing through the engine asks.

On a game clock it is a `train.arena.match.ClockedPlayer`: the match keeps its clock and sends it with each
query (`clock`, `increment`), so the program's own time manager decides each move's time and the match
measures what it took. With a time a move it sends `time`. Only the protocol's text is shared with
`play`: this module imports nothing from it.
"""

from __future__ import annotations

import json
import os
import queue
import shlex
import subprocess
import tempfile
import threading
from pathlib import Path

from selfplay.tree_search.time_manager import GameClock
from zero.rules.game import Game, Move
from zero.rules.notation import NotationError, resolve_move


# The seconds a program may take to start and answer its first query: a checkers-zero engine on a cold cache
# compiles its search kernels and derives its int8 model first, minutes on a busy 2-core machine.
STARTUP_SECONDS = 600.0
# The most seconds the protocol takes as a query's `time` or `clock`: a clock that holds more (a long base, or
# a bank grown over a long game) is sent as this much, which a move never needs.
PROTOCOL_MOST_SECONDS = 3600.0


class ProgramError(RuntimeError):
    """The program could not start, ended, gave no answer in time, or answered with an error or a move that
    is not legal; the message says which."""


class ProgramPlayer:
    """See the module docstring. `command` is run in `cwd` (default this directory) with one thread a
    library (OMP_NUM_THREADS=1): a match gives each player one core."""

    def __init__(self, name: str, command: str, *, clock: GameClock | None = None, seconds: float | None = None,
                 cwd: Path | None = None, patience: float = 120.0) -> None:
        """`patience`: the seconds an answer may take beyond the move's time before the program is taken
        to hang (its start, which may compile its kernels, gets STARTUP_SECONDS)."""
        if (clock is None) == (seconds is None):
            raise ValueError(f"{name}: a program player needs a game clock or a time a move, not both")
        if seconds is not None and not 0 < seconds <= PROTOCOL_MOST_SECONDS:
            raise ValueError(f"{name}: the time a move must be above 0 and at most {PROTOCOL_MOST_SECONDS:g} s, "
                             f"not {seconds:g}")
        self.name = name
        self.command = command
        self.clock = clock
        self.seconds = seconds
        self.cwd = cwd
        self.patience = patience
        self._process: subprocess.Popen | None = None
        self._stderr = None
        self._lines: queue.Queue[str] = queue.Queue()  # the program's output, read by a thread of its own
        self._queries = 0

    def warm_up(self) -> None:
        """Start the program and wait until it answers: its loading is not a move's time."""
        if self._process is None:
            self._stderr = tempfile.TemporaryFile()  # its last line is quoted if the program ends
            try:
                self._process = subprocess.Popen(shlex.split(self.command), stdin=subprocess.PIPE,
                                                 stdout=subprocess.PIPE, stderr=self._stderr, text=True,
                                                 cwd=self.cwd, env={**os.environ, "OMP_NUM_THREADS": "1"})
            except OSError as exc:
                raise ProgramError(f"{self.name}: cannot run {self.command}: {exc}") from None
            self._lines = queue.Queue()
            threading.Thread(target=_read_lines, args=(self._process.stdout, self._lines), daemon=True).start()
            self._ask({"query": "version"}, STARTUP_SECONDS)

    def choose(self, game: Game) -> Move:
        return self._move(game, {"time": self.seconds}, self.seconds)

    def choose_on_clock(self, game: Game, left: float) -> Move:
        # The protocol takes a clock above 0 and knows no debt: a program that overran is told a clock all but
        # empty, as a real one would show it, and pays the debt back at once.
        left = min(max(left, 1e-3), PROTOCOL_MOST_SECONDS)
        return self._move(game, {"clock": left, "increment": min(self.clock.increment, left)}, left)

    def close(self) -> None:
        if self._process is not None:
            try:
                self._process.stdin.close()
            except BrokenPipeError:  # it has ended already
                pass
            _wait_or_kill(self._process)
            self._process = None
            self._stderr.close()

    def _move(self, game: Game, limits: dict, seconds: float) -> Move:
        self.warm_up()
        answer = self._ask({"fen": game.positions[0].fen(), "moves": [str(m) for m in game.moves], "top": 1,
                            "pv": False, "wdl": False, **limits}, seconds)
        try:
            return resolve_move(str(answer.get("move")), game.legal_moves())
        except NotationError as exc:
            raise ProgramError(f"{self.name} answered {answer.get('move')!r}: {exc}") from None

    def _ended(self) -> str:
        status = _wait_or_kill(self._process)  # its output ended or its input broke: it is ending
        self._stderr.seek(0)
        said = _last_line(self._stderr.read())
        return f"{self.name} ({self.command}) ended with exit status {status}" + (f": {said}" if said else "")

    def _ask(self, query: dict, seconds: float) -> dict:
        self._queries += 1
        query_id = self._queries
        try:
            self._process.stdin.write(json.dumps({"id": query_id, **query}) + "\n")
            self._process.stdin.flush()
        except BrokenPipeError:
            raise ProgramError(self._ended()) from None
        try:
            line = self._lines.get(timeout=seconds + self.patience)
        except queue.Empty:
            self._process.kill()
            raise ProgramError(f"{self.name} ({self.command}) gave no answer in {seconds + self.patience:g} s") \
                from None
        if not line:
            raise ProgramError(self._ended())
        try:
            answer = json.loads(line)
        except json.JSONDecodeError:
            raise ProgramError(f"{self.name} answered a line that is not JSON: {line.strip()[:200]!r}") from None
        if not isinstance(answer, dict) or answer.get("id") != query_id:
            raise ProgramError(f"{self.name} answered {line.strip()[:200]!r} to query {query_id}")
        if "error" in answer:
            raise ProgramError(f"{self.name} answered an error: {answer['error']}")
        return answer


def _wait_or_kill(process: subprocess.Popen, seconds: float = 30.0) -> int:
    """The exit status of a program told to end (its input closed or broken): it gets `seconds` to end by
    itself, and is killed after that."""
    try:
        return process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        process.kill()
        return process.wait()


def _last_line(data: bytes) -> str:
    lines = data.decode(errors="replace").strip().splitlines()
    return lines[-1] if lines else ""


def _read_lines(stream, lines: queue.Queue) -> None:
    """Every line of `stream`, then "" at its end."""
    for line in stream:
        lines.put(line)
    lines.put("")
