"""PDN game files: a streaming reader that replays every game through the rules, and a writer.

Reading
    `read_pdn(source)` takes a path, an open text file or any iterable of lines and yields, one game at a
    time and in file order, either a `PdnGame` (the game replayed legally) or a `PdnError` (the game could
    not be read or replayed; it is skipped and the following games keep coming). The iterator itself raises
    nothing for bad content: every problem in the text becomes a `PdnError` record carrying the game's
    1-based index, the line its text starts on and the reason. Only I/O failures (a missing file) raise.
    `read_pdn_text(text)` does the same for a string. `bounded_lines(handle)` gives an open file's lines as
    read_pdn reads a path's, never holding an over-long line whole (for callers that pass their own lines).

    Syntax handled: `[Tag "value"]` headers (backslash escapes in values), `{...}` comments spanning lines
    with anything inside but a whole header line (a `[Tag "value"]` line inside an open comment ends it as never
    closed and starts the next game, so that one open brace cannot swallow the games after it), `;` comments to the end of the line, `(...)` variations (nested, skipped),
    move numbers `12.` / `12...` anywhere (also at line ends), NAGs `$3` and `!`/`?` marks, moves `11-15`,
    `22x15`, `26x17x10x1`, a capture given by its end squares only (`26x1`, resolved against the legal
    moves; ambiguous is an error naming the candidates), results `1-0`, `0-1`, `1/2-1/2`, `*` and the
    tournament forms `2-0`, `0-2`, `1-1` (read as `1-0`, `0-1`, `1/2-1/2`), CRLF line ends and a BOM.
    A game starts at its first tag or, after a finished game, at its first move; it ends at its result.
    A repeated tag name inside one header starts a new game (the earlier header lost its moves).
    A game whose text ends without a result still yields, with the Result tag's value or `*`; a result in
    the moves that contradicts the Result tag (other than `*`) fails the game, as one of them is wrong.
    Move numbers are skipped, not checked against the ply (archives number loosely after a FEN start).

    Limits keep memory bounded on hostile or broken files (real archives are far inside them: OCA 2.0's
    longest line has 88 characters, its longest game 239 plies, its largest header 7 tags): a line longer than
    MAX_LINE characters is not read (when a path is given it is not even held whole) and fails the game it
    falls in, closing any comment open there, since where that comment ends cannot be known without reading
    the line; as it may have held the game's result too, a tag or a blank line after it ends that game; a
    tag value longer than MAX_TAG, a header with more than MAX_TAGS tags, or more than MAX_PLIES
    moves fail their game and nothing more of it is kept. Reading goes on with the next game.

    A move written with `x` that is not a capture (or `-` for a capture) is accepted, as human archives
    are loose about the mark; text glued onto a move (`8-11Redoverstepped...`) is reported, not guessed at.

    Replay checks legality only. Draw rules are not applied: human games go on past threefold repetitions
    and 40-move stretches (players claim draws, they are not automatic), and the recorded result is what the
    players agreed, so a replay that stopped at a draw-rule boundary would reject real games (in OCA 2.0,
    38 games go on after a threefold repetition and one after 80 plies without progress).
    The replay runs in a numba kernel over movegen (same matching as notation.resolve_move, which words
    the message when a move fails): Python-side legal-move lists would cost several times more per ply.

Writing
    `write_game(moves, result, tags, start, marks, comments)` writes one game as standard PDN: the given tags
    in order, a Result tag (added when absent), `[SetUp "1"]` and `[FEN]` when the start is not the initial
    position, numbered moves with full capture paths (each with its `?`/`!` mark and `{comment}` when
    given), lines wrapped at 80 characters, the result at the end.
    Reading that text back gives the same moves, result, start and tags (with Result, SetUp and FEN
    as written).
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from numba import njit

from zero.rules import movegen
from zero.rules.game import Move, Position
from zero.rules.notation import NotationError, fen_to_position, resolve_move

RESULTS = ("1-0", "0-1", "1/2-1/2", "*")
MAX_LINE = 65_536  # characters, line end included
MAX_TAG = 4_096  # characters in one tag value
MAX_TAGS = 256  # tags in one header
MAX_PLIES = 10_000  # moves in one game
# Tournament score forms some archives use, mapped to the standard results.
_RESULT_ALIASES = {"2-0": "1-0", "0-2": "0-1", "1-1": "1/2-1/2"}


class PdnError(ValueError):
    """A PDN game that could not be read or replayed.

    game_index: 1-based number of the game in the file; line: the line the game's text starts on;
    error_line: the line of the offending text (None when the problem is the game as a whole);
    reason: what is wrong. str() gives 'game N (line L): reason'.
    """

    def __init__(self, game_index: int, line: int, reason: str, error_line: int | None = None):
        super().__init__(f"game {game_index} (line {line}): {reason}")
        self.game_index = game_index
        self.line = line
        self.reason = reason
        self.error_line = error_line


@dataclass
class PdnGame:
    """A game read from PDN and replayed: every move is a legal `Move` with its full path."""

    index: int  # 1-based game number in the file
    line: int  # line its text starts on
    tags: dict[str, str]
    start: Position
    moves: list[Move]
    result: str  # one of RESULTS

    @property
    def plies(self) -> int:
        return len(self.moves)

    def positions(self) -> list[Position]:
        """The start position and the position after every move (plies + 1 positions)."""
        out = [self.start]
        for mv in self.moves:
            out.append(out[-1].play(mv))
        return out


# ---------------------------------------------------------------------------------------------- tokenizer

_DELIM = r"\s{}()\[\];"
# The tag value is written as runs of plain characters between escapes: a repeated one-character class keeps
# no backtracking state per character, where `(?:[^"\\]|\\.)*` kept some 400 bytes per character (gigabytes
# for a long tag line).
_TOKEN = re.compile(
    r"\s*(?:"
    r"(?P<result>(?:1/2-1/2|1-0|0-1|2-0|0-2|1-1|\*)(?![^" + _DELIM + r"]))"
    r"|(?P<move>(?P<squares>\d{1,2}(?:[-x:]\d{1,2})+)[!?]*(?P<glued>[^" + _DELIM + r"]*))"
    r"|(?P<number>\d+\.+)"
    r"|(?P<tag>\[\s*(?P<name>[A-Za-z0-9_]+)\s*\"(?P<value>[^\"\\]*(?:\\.[^\"\\]*)*)\"\s*\])"
    r"|(?P<badtag>\[[^\]]*\]?)"
    r"|(?P<comment>\{)"
    r"|(?P<nag>\$\d+|[!?]+)"
    r"|(?P<open>\()"
    r"|(?P<close>\))"
    r"|(?P<semicolon>;)"
    r"|(?P<other>[^" + _DELIM + r"]+|[}\]])"
    r"|$)"  # only whitespace left on the line: no group matches
)
_UNESCAPE = re.compile(r"\\(.)")
_TAG_LINE = re.compile(r"\s*\[\s*[A-Za-z0-9_]+\s*\"[^\"\\]*(?:\\.[^\"\\]*)*\"\s*\]\s*$")
_SPLIT_SQUARES = re.compile(r"[-x:]")


class _Draft:
    """A game being collected: its header, move texts with their lines, result and first problem."""

    __slots__ = ("line", "tags", "texts", "lines", "result", "error", "error_line", "depth", "depth_line", "unread")

    def __init__(self, line: int):
        self.line = line
        self.tags: dict[str, str] = {}
        self.texts: list[str] = []
        self.lines: list[int] = []
        self.result: str | None = None
        self.error: str | None = None
        self.error_line: int | None = None
        self.depth = 0  # open variation parentheses
        self.depth_line = 0
        self.unread = False  # a line of it was too long to read (and may have held its moves and result)

    def fail(self, reason: str, line: int) -> None:
        if self.error is None:
            self.error = reason
            self.error_line = line

    @property
    def has_movetext(self) -> bool:
        return bool(self.texts) or self.result is not None or self.unread


def _lines_of(source: str | os.PathLike | Iterable[str]) -> tuple[Iterable[str], io.TextIOBase | None]:
    if isinstance(source, (str, os.PathLike)):
        handle = open(source, encoding="utf-8-sig", errors="replace", newline=None)
        return bounded_lines(handle), handle
    return source, None


def bounded_lines(handle: io.TextIOBase) -> Iterator[str]:
    """The file's lines, an over-long one cut to MAX_LINE + 1 characters (enough for the reader to refuse it),
    its rest skipped piece by piece, so that a file of one huge line is never held whole."""
    while line := handle.readline(MAX_LINE + 1):
        if len(line) > MAX_LINE and not line.endswith("\n"):
            while (rest := handle.readline(MAX_LINE)) and not rest.endswith("\n"):
                pass
        yield line


def read_pdn(source: str | os.PathLike | Iterable[str]) -> Iterator[PdnGame | PdnError]:
    """Yield each game of a PDN file as a PdnGame, or a PdnError when it cannot be read (see module doc).

    source: a path, or an open text file / iterable of lines (a string is a path: use read_pdn_text for
    PDN text).
    """
    lines, handle = _lines_of(source)
    try:
        index = 0
        for draft in _drafts(lines):
            index += 1
            yield _finish(draft, index)
    finally:
        if handle is not None:
            handle.close()


def read_pdn_text(text: str) -> Iterator[PdnGame | PdnError]:
    """read_pdn over PDN text held in a string."""
    return read_pdn(io.StringIO(text, newline=None))


def _drafts(lines: Iterable[str]) -> Iterator[_Draft]:
    """Split the text into games: the tokenizer and the game-boundary rules in one pass over the lines."""
    game: _Draft | None = None
    comment_line = 0  # line where the open {comment} started; 0 when none is open
    match = _TOKEN.match
    lineno = 0
    for line in lines:
        lineno += 1
        if lineno == 1 and line.startswith("\ufeff"):
            line = line[1:]
        if len(line) > MAX_LINE:
            # An open comment may end in the unread line. Taking it as ended risks only junk read into this
            # failed game; taking it as open could swallow the games after it.
            comment_line = 0
            done, game = _draft_for_text(game, lineno)
            if done is not None:
                yield done
            game.fail(f"line longer than {MAX_LINE} characters, not read", lineno)
            game.unread = True
            continue
        if game is not None and game.unread and not comment_line and not line.strip():
            # The unread line may have ended the game: a blank line after it ends it, as blank lines part the
            # games of archives, so that the next game (tags or none) is not read into this failed one.
            yield game
            game = None
            continue
        pos = 0
        end = len(line)
        if comment_line:
            close = line.find("}")
            if close >= 0:
                comment_line = 0
                pos = close + 1
            elif _TAG_LINE.match(line):
                # A whole header line inside a comment: the comment was never closed and the next game starts
                # here. Read as comment text it would swallow every game after it, unreported.
                if game is None or game.result is not None:
                    if game is not None:
                        yield game
                    game = _Draft(comment_line)
                game.fail(f"comment opened on line {comment_line} is never closed", comment_line)
                yield game
                game = None
                comment_line = 0
            else:
                continue
        while pos < end:
            m = match(line, pos)
            kind = m.lastgroup
            pos = m.end()
            if kind is None:  # trailing whitespace
                break
            if kind == "comment":
                close = line.find("}", pos)
                if close < 0:
                    comment_line = lineno
                    break
                pos = close + 1
                continue
            if kind == "semicolon":
                break
            if kind == "tag" or kind == "badtag":
                name = m.group("name") if kind == "tag" else None
                if game is not None and (game.has_movetext or (name is not None and name in game.tags)):
                    if game.depth:
                        game.fail(f"variation opened on line {game.depth_line} is never closed", game.depth_line)
                    yield game
                    game = None
                if game is None:
                    game = _Draft(lineno)
                value = m.group("value")
                if kind == "badtag":
                    game.fail(f"malformed tag {_shown(m.group())}", lineno)
                elif len(value) > MAX_TAG:
                    game.fail(f"tag {name} longer than {MAX_TAG} characters", lineno)
                elif len(game.tags) >= MAX_TAGS:
                    game.fail(f"more than {MAX_TAGS} tags", lineno)
                else:
                    game.tags[name] = _UNESCAPE.sub(r"\1", value) if "\\" in value else value
                continue
            done, game = _draft_for_text(game, lineno)
            if done is not None:
                yield done
            if game.depth:
                if kind == "open":
                    game.depth += 1
                elif kind == "close":
                    game.depth -= 1
                continue
            if kind == "move":
                if m.group("glued"):
                    game.fail(f"text glued onto move {_shown(m.group('move'))}", lineno)
                if len(game.texts) < MAX_PLIES:
                    game.texts.append(m.group("squares"))
                    game.lines.append(lineno)
                else:
                    game.fail(f"more than {MAX_PLIES} moves", lineno)
            elif kind == "number" or kind == "nag":
                pass
            elif kind == "result":
                result = m.group("result")
                game.result = _RESULT_ALIASES.get(result, result)
            elif kind == "open":
                game.depth = 1
                game.depth_line = lineno
            elif kind == "close":
                game.fail("')' without a variation to close", lineno)
            else:
                game.fail(f"unexpected text {_shown(m.group().strip())}", lineno)
    if comment_line:
        if game is None or game.result is not None:
            if game is not None:
                yield game
            game = _Draft(comment_line)
        game.fail(f"comment opened on line {comment_line} is never closed", comment_line)
    if game is not None:
        if game.depth:
            game.fail(f"variation opened on line {game.depth_line} is never closed", game.depth_line)
        yield game


def _draft_for_text(game: _Draft | None, lineno: int) -> tuple[_Draft | None, _Draft]:
    """(a finished game to hand out first or None, the game that text on line `lineno` belongs to)."""
    if game is None:
        return None, _Draft(lineno)
    if game.result is not None:
        return game, _Draft(lineno)
    return None, game


def _shown(text: str, limit: int = 40) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


# ------------------------------------------------------------------------------------------------- replay

_OUT_CAPTURED, _OUT_LEN, _OUT_PATH = 0, 1, 2


@njit(cache=True)
def _replay(black, white, kings, black_to_move, squares, bounds, out, buf):
    """Resolve and play each move text (its squares are squares[bounds[i]:bounds[i+1]]) as resolve_move does.

    Writes each chosen move into out[i] (captured mask, path length, 1-based path) and returns how many
    moves were resolved; fewer than len(bounds) - 1 means the next one is illegal, ambiguous or malformed
    (the caller asks resolve_move for the exact message).
    """
    n_plies = bounds.shape[0] - 1
    for i in range(n_plies):
        lo = bounds[i]
        length = bounds[i + 1] - lo
        for k in range(lo, lo + length):
            if squares[k] < 1 or squares[k] > 32:
                return i
        n = movegen.generate(black, white, kings, black_to_move, True, buf)
        chosen = -1
        for r in range(n):
            if buf[r, movegen.F_LEN] != length:
                continue
            same = True
            for k in range(length):
                if buf[r, movegen.F_PATH + k] != squares[lo + k] - 1:
                    same = False
                    break
            if same:
                chosen = r
                break
        if chosen < 0 and length == 2:
            found = 0
            for r in range(n):
                if buf[r, movegen.F_FROM] == squares[lo] - 1 and buf[r, movegen.F_TO] == squares[lo + 1] - 1:
                    found += 1
                    chosen = r
            if found != 1:
                return i
        if chosen < 0:
            return i
        path_len = buf[chosen, movegen.F_LEN]
        out[i, _OUT_CAPTURED] = buf[chosen, movegen.F_CAPTURED]
        out[i, _OUT_LEN] = path_len
        for k in range(path_len):
            out[i, _OUT_PATH + k] = buf[chosen, movegen.F_PATH + k] + 1
        black, white, kings = movegen.make(
            black, white, kings, black_to_move,
            buf[chosen, movegen.F_FROM], buf[chosen, movegen.F_TO], buf[chosen, movegen.F_CAPTURED],
        )
        black_to_move = not black_to_move
    return n_plies


_BUF = movegen.new_move_buffer()
_MOVE_CACHE: dict[tuple, Move] = {}  # archives reuse the same few thousand moves; one object each


def _start_position(tags: dict[str, str]) -> Position:
    setup = tags.get("SetUp", "").strip()
    fen = tags.get("FEN")
    if setup == "0" or fen is None:
        if setup == "1":
            raise NotationError('[SetUp "1"] without a [FEN] tag')
        return Position.initial()
    return fen_to_position(fen)


def _finish(draft: _Draft, index: int) -> PdnGame | PdnError:
    """Turn a collected game into a replayed PdnGame or the PdnError saying why it cannot be."""
    if draft.error is not None:
        return PdnError(index, draft.line, f"line {draft.error_line}: {draft.error}", draft.error_line)
    if not draft.has_movetext:
        return PdnError(index, draft.line, "tags without moves or result")
    try:
        start = _start_position(draft.tags)
    except NotationError as exc:
        return PdnError(index, draft.line, f"bad start position: {exc}", draft.line)
    texts = draft.texts
    flat: list[int] = []
    bounds = [0]
    for text in texts:
        flat.extend(map(int, _SPLIT_SQUARES.split(text)))
        bounds.append(len(flat))
    out = np.empty((len(texts), _OUT_PATH + movegen.MAX_PATH), dtype=np.int64)
    squares = np.array(flat, dtype=np.int64)
    done = _replay(start.black, start.white, start.kings, start.black_to_move, squares,
                   np.array(bounds, dtype=np.int64), out, _BUF)
    moves = []
    cache = _MOVE_CACHE
    for row in out[:done].tolist():
        key = tuple(row[: _OUT_PATH + row[_OUT_LEN]])
        mv = cache.get(key)
        if mv is None:
            mv = cache[key] = Move(key[_OUT_PATH:], key[_OUT_CAPTURED])
        moves.append(mv)
    if done < len(texts):
        return PdnError(index, draft.line, _replay_failure(start, moves, texts[done], draft.lines[done]),
                        draft.lines[done])
    tagged = draft.tags.get("Result", "").strip()
    tagged = _RESULT_ALIASES.get(tagged, tagged)
    if draft.result is not None and tagged in RESULTS and "*" not in (tagged, draft.result) \
            and tagged != draft.result:
        return PdnError(index, draft.line, f"the moves end in {draft.result} but the Result tag says {tagged}")
    result = draft.result or tagged
    return PdnGame(index, draft.line, draft.tags, start, moves, result if result in RESULTS else "*")


def _replay_failure(start: Position, played: list[Move], text: str, line: int) -> str:
    """The reason the move after `played` fails, worded by resolve_move."""
    pos = start
    for mv in played:
        pos = pos.play(mv)
    ply = len(played)
    number = _move_number(start, ply)
    try:
        resolve_move(text, pos.legal_moves())
    except NotationError as exc:
        return f"line {line}: move {number} {text}: {exc}"
    raise AssertionError(f"replay refused {text} but resolve_move accepts it")  # the two must agree


def _move_number(start: Position, ply: int) -> str:
    """'12.' for a Black move, '12...' for a White move, counting from 1 at the start position."""
    offset = 0 if start.black_to_move else 1
    full = (ply + offset) // 2 + 1
    black_moves = (ply + offset) % 2 == 0
    return f"{full}." if black_moves else f"{full}..."


# ------------------------------------------------------------------------------------------------- writer

LINE_WIDTH = 80
_TAG_NAME = re.compile(r"[A-Za-z0-9_]+")


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


MOVE_MARKS = ("", "!", "?", "!!", "??", "!?", "?!")


def write_game(moves: Sequence[Move], result: str = "*", tags: dict[str, str] | None = None,
               start: Position | None = None, marks: Sequence[str] | None = None,
               comments: Sequence[str | None] | None = None) -> str:
    """One game as PDN text ending in a blank line (see the module doc for what is written). `marks[k]`
    (one of MOVE_MARKS) is written onto move k, `comments[k]` (text without braces) in braces after it."""
    if result not in RESULTS:
        raise ValueError(f"result must be one of {', '.join(RESULTS)}, not {result!r}")
    for name, per_move in (("marks", marks), ("comments", comments)):
        if per_move is not None and len(per_move) != len(moves):
            raise ValueError(f"{len(per_move)} {name} for {len(moves)} moves")
    if marks is not None and any(mark not in MOVE_MARKS for mark in marks):
        raise ValueError(f"move marks are {', '.join(repr(m) for m in MOVE_MARKS)}")
    if comments is not None and any(c is not None and ("{" in c or "}" in c) for c in comments):
        raise ValueError("a comment cannot hold a brace: it would end the comment early")
    header = dict(tags or {})
    header.setdefault("Result", result)
    start = start or Position.initial()
    if start != Position.initial():
        header["SetUp"] = "1"
        header["FEN"] = start.fen()
    for name, value in header.items():
        if not _TAG_NAME.fullmatch(name) or "\n" in value or "\r" in value:
            raise ValueError(f"cannot write tag {name!r} = {value!r}: names are letters, digits and _; "
                             "values are one line")
    out = [f'[{name} "{_escape(value)}"]' for name, value in header.items()]
    words: list[str] = []
    for ply, move in enumerate(moves):
        number = _move_number(start, ply)
        text = f"{move}{marks[ply] if marks else ''}"
        words.append(text if number.endswith("...") and ply > 0 else f"{number} {text}")
        if comments and comments[ply]:
            words.extend(f"{{{comments[ply]}}}".split())
    words.append(result)
    line = ""
    for word in words:
        if line and len(line) + 1 + len(word) > LINE_WIDTH:
            out.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    out.append(line)
    return "\n".join(out) + "\n\n"
