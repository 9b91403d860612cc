"""Playing against a checkpoint in the browser (`checkers-zero serve`, play.cli.serve).

A small JSON API over the standard library's HTTP server, and one self-contained page (web/index.html)
that uses it. The server binds 127.0.0.1 unless told otherwise: it is a local toy, not a public service.

API (every body is a JSON object; unknown fields are refused):
    GET  /                          the page
    GET  /api/info                  levels, default level, checkpoint name
    POST /api/games                 new game {color?: black|white, level?: NAME, sims?: N, fen?: FEN} -> state
    GET  /api/games/ID              state
    POST /api/games/ID/move         {path: [squares]} or {move: "11-15"} (x for a capture, - for a step) -> state
    POST /api/games/ID/engine       the engine plays its move -> state (with its thinking)
    POST /api/games/ID/undo         take back the person's last move and the reply; after an agreed draw or
                                    a resignation, reopen the game as it was before it (no move taken
                                    back) -> state
    POST /api/games/ID/hint         the engine's top moves for the person -> state with "hint"
    POST /api/games/ID/level        {level: NAME} or {sims: N} -> state
    POST /api/games/ID/draw         offer a draw, on the person's turn -> state with "draw_accepted"
    POST /api/games/ID/resign       -> state
    GET  /api/games/ID/pdn          the record as a PDN file
    POST /api/line                  {fen?, moves?: [MOVE]} -> the positions and legal moves along them
    POST /api/pdn                   {pdn: TEXT} -> the games of a PDN file (and those that cannot be read)
    POST /api/analyses              {fen?, moves?, sims?, top?} -> a live analysis (play.analysis_board)
    GET  /api/analyses/ID           how far it is, its latest answer   (POST .../stop stops it)
    POST /api/reviews               {pdn, game?} or {fen?, moves}, sims? -> a review of one game
    GET  /api/reviews/ID            how far it is, the review when done   (POST .../stop stops it)
docs/play.md gives every body and status. A request that is malformed (400), names no game (404), is not possible now (409) or plays an illegal
move (422) gets that status and {"error": message}; the game is left as it was. POSTs must be sent as
application/json (415 otherwise) and the Host must name this machine (403): other web sites the person
visits cannot then drive the game through their browser, whatever address the server is bound to.

Limits (`Limits`), so that one client cannot take the server from the others:
- Work per request: a search is at most MAX_SIMULATIONS simulations (4 x the strongest level; more is a
  400), or MAX_DEPTH plies for the alpha-beta engine (the strongest level's and two more, a few seconds). Searches share one engine and run one at a time; a request waits only for its own game and, when
  it searches, for the engine: the page, /api/info and other games' moves do not wait on a search.
- Games: a game in use is never dropped for another. A client is a browser session (the page sets a cookie
  for it: a label to count games by, no credential) or, for a program that sends no such cookie, its address.
  A client holds at most `max_games_per_client` games, an address (whatever cookies its requests carry: anyone
  can make one up) `max_games_per_address`, and the server `max_games`; a new game beyond any of them replaces
  the least recently used game (the client's own, the address's, or anyone's) that is free to go: one unused
  for `game_idle_seconds`, or one never played (no action done in it since it was made: a refused request is
  no play) and unused for `unplayed_game_seconds`. Otherwise it is refused (429, 429, 503). So a program's
  burst of new games, under one cookie, many or none, locks out no browser on another address, which finds
  the slots one address cannot hold; a browser on the program's own address counts as a client of its own and
  finds room a minute later unless the program plays in every game it holds. Every program on this machine
  is one address, and a person's game is kept safe by being in use.
- Analyses and reviews: a client runs one review at a time (409) and one analysis (its new one stops its
  last), an address `max_jobs_per_address` at once (429), the server keeps `max_jobs` (503); each search at most MAX_SIMULATIONS simulations a position, and one
  nobody polls for `job_idle_seconds` stops (play.analysis_board). The page polls them rather than holding
  a stream open: each poll is a short request under the limits below, like any other.
- Connections: one request each (HTTP/1.0). Until its request (line, headers and the body its one
  Content-Length announces) is all in, a connection costs a buffer that one thread reads, not a thread of its
  own; it is closed after `connection_timeout` seconds without a byte, or `request_deadline` seconds after it
  was made. At most `max_connections` are open: a new one beyond them cuts off the one that has waited longest
  for its request, so clients that trickle their headers cannot keep a browser's request out. A request all
  in is answered by a thread of its own, at most `max_answering` at once (503 beyond).
- A body is framed by one Content-Length only: Transfer-Encoding is refused (411), and so are two
  Content-Lengths (400), rather than read as an empty body or as one of the two.
A client that goes away before its answer is not an error: nothing is logged for it.
"""

from __future__ import annotations

import contextlib
import http.client
import io
import json
import queue
import re
import secrets
import selectors
import socket
import sys
import threading
import time
import traceback
from collections import OrderedDict
from dataclasses import dataclass, field
from email.message import Message
from http.server import BaseHTTPRequestHandler, HTTPServer
from importlib import resources
from typing import Any, Callable

from zero.corpus.pdn import PdnError, PdnGame, read_pdn_text
from zero.rules.game import Position
from zero.rules.notation import NotationError, fen_to_position
from zero.run.config import check_settings, setting
from play.analysis_board import ApiError, Board, line_json, pdn_game_json, position_of
from play.engine import (
    ALPHABETA, DEFAULT_LEVEL, LEVELS, Budget, Engine, EngineError, budget_for,
)
from play.session import HumanGame, PlayError

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
MAX_BODY_BYTES = 64 * 1024
# A browser's request line and headers take a few KiB; a longer head is refused before it is parsed.
MAX_HEAD_BYTES = 32 * 1024
MAX_SIMULATIONS = 4 * max(level.simulations for level in LEVELS.values())
MAX_DEPTH = max(level.depth for level in LEVELS.values()) + 2
SESSION_COOKIE = "checkers_zero_session"
_SESSION = re.compile(rf"(?:^|;)\s*{SESSION_COOKIE}=([0-9a-f]{{32}})\s*(?=;|$)")
_ENGINE_ACTIONS = frozenset({"engine", "hint", "draw"})  # the game actions that search
_HEAD_END = re.compile(rb"\r?\n\r?\n")  # the empty line after the headers, as http.client reads lines


def _refusal(status: str, message: str) -> bytes:
    """A whole answer sent by the thread that reads requests, which has no handler to write one."""
    body = json.dumps({"error": message}).encode()
    return (b"HTTP/1.0 %s\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s"
            % (status.encode(), len(body), body))


_BUSY = _refusal("503 Service Unavailable", "too many requests at once; try again")
_HEAD_TOO_LONG = _refusal("431 Request Header Fields Too Large",
                          f"request line and headers over {MAX_HEAD_BYTES} bytes")


@dataclass(frozen=True)
class Limits:
    """What one server lets its clients take (see the module doc)."""

    # A game in memory is a few kilobytes.
    max_games: int = setting(256, low=1, high=1_000_000)
    max_games_per_client: int = setting(64, low=1, high=1_000_000)
    # Below max_games, so that the slots one address cannot hold are always there for a browser on another:
    # session cookies are labels anyone can make up, so a client's cap alone binds no program.
    max_games_per_address: int = setting(128, low=1, high=1_000_000)
    game_idle_seconds: float = setting(1800.0, low=0)
    # What a burst of new games leaves behind; a person who starts a game plays in it within a minute.
    unplayed_game_seconds: float = setting(60.0, low=0)
    # Open connections, most of them waiting for their request (a buffer each, well under the open-file limit).
    max_connections: int = setting(256, low=1, high=65_536)
    # Requests being answered: a thread each, and most wait for the one engine.
    max_answering: int = setting(32, low=1, high=4096)
    connection_timeout: float = setting(30.0, above=0)
    # A browser sends a request in milliseconds; this is for slow networks, not slow clients.
    request_deadline: float = setting(10.0, above=0)
    # Analyses and reviews (play.analysis_board): kept at most (a finished one makes room), running at once
    # from one address, and how long one runs with nobody asking about it (the page asks several times a
    # second while it shows one).
    max_jobs: int = setting(64, low=1, high=100_000)
    max_jobs_per_address: int = setting(8, low=1, high=100_000)
    job_idle_seconds: float = setting(20.0, above=0)


@dataclass
class _Entry:
    """A game in play, who made it, when it was last asked for, and the lock its requests take in turn."""

    game: HumanGame
    client: str
    address: str  # the client's network address, which a cookie does not change
    last_used: float = field(default_factory=time.monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock)
    played: bool = False  # some action has been done in it (a refused request does not count)


def _fields(body: dict[str, Any], allowed: dict[str, type | tuple[type, ...]]) -> dict[str, Any]:
    """The body's fields after checking names and types (bool is not accepted as an int)."""
    unknown = sorted(set(body) - set(allowed))
    if unknown:
        raise ApiError(400, f"unknown field(s) {unknown}; allowed: {sorted(allowed)}")
    for name, value in body.items():
        typ = allowed[name]
        if isinstance(value, bool) and typ is not bool or not isinstance(value, typ):
            names = typ.__name__ if isinstance(typ, type) else " or ".join(t.__name__ for t in typ)
            raise ApiError(400, f"field {name!r} must be {names}, not {_shown(value)}")
    return body


def _shown(value: Any) -> str:
    """A JSON value for an error message: scalars as written, containers by kind (their text may be deep
    enough that writing it out again fails)."""
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return json.dumps(value)[:40]


def _budget(fields: dict[str, Any], kind: str) -> tuple[str | None, Budget]:
    """A game's level, or the sims (an MCTS engine's) or depth (the alpha-beta engine's) it names instead."""
    level, sims, depth = fields.get("level"), fields.get("sims"), fields.get("depth")
    if sum(x is not None for x in (level, sims, depth)) > 1:
        raise ApiError(400, "give one of level, sims and depth")
    if (sims if kind == ALPHABETA else depth) is not None:
        raise ApiError(400, "this engine searches to a depth: give depth or a level" if kind == ALPHABETA
                       else "this engine searches simulations: give sims or a level")
    if sims is not None:
        return None, budget_for(simulations=_simulations(fields, sims))
    if depth is not None:
        if not 1 <= depth <= MAX_DEPTH:
            raise ApiError(400, f"depth must be between 1 and {MAX_DEPTH}")
        return None, budget_for(depth=depth)
    if level is not None and level not in LEVELS:
        raise ApiError(400, f"unknown level {level!r}; levels: {', '.join(LEVELS)}")
    return level or DEFAULT_LEVEL, budget_for(level or DEFAULT_LEVEL, kind=kind)


def game_state(game_id: str, s: HumanGame) -> dict[str, Any]:
    """Everything the page draws: board, turn, legal moves of the person, record, engine thinking."""
    pos = s.game.position
    last = s.last_move
    return {
        "id": game_id,
        "fen": str(pos),
        "board": {str(sq): pos.piece_at(sq) for sq in range(1, 33) if pos.piece_at(sq)},
        "black_to_move": pos.black_to_move,
        "human_color": "black" if s.human_black else "white",
        "human_to_move": s.human_to_move,
        "engine_to_move": s.engine_to_move,
        "over": s.over,
        "status": s.status(),
        "result": s.result,
        "last_move": None if last is None else {"move": str(last), "path": list(last.path)},
        "moves": [str(mv) for mv in s.game.moves],
        "first_ply": s.first_ply,
        "legal_moves": [{"move": str(mv), "path": list(mv.path)} for mv in s.game.legal_moves()]
        if s.human_to_move else [],
        "level": s.level,
        "budget": str(s.budget),
        "thinking": s.last_thinking,
        "pdn": s.pdn(),
        "fens": [p.fen() for p in s.game.positions],  # the position at every ply, for the page to step through
    }


# A Host header is host[:port] (RFC 9110 7.2): a name or IPv4 address, or an IPv6 address in brackets, then an
# optional port. Anything else (userinfo, a path, a second colon) is refused whole rather than cut at a colon.
_HOST_HEADER = re.compile(r"(?:\[(?P<ipv6>[0-9a-f:.]+)\]|(?P<name>[a-z0-9._-]+))(?::(?P<port>[0-9]{1,5}))?")


def _host_name(header: str) -> str | None:
    """The host of a Host header, without its port and IPv6 brackets, lower case; None if it is not a host
    with an optional port 1-65535."""
    match = _HOST_HEADER.fullmatch(header.strip().lower())
    if match is None or match["port"] is not None and not 1 <= int(match["port"]) <= 65535:
        return None
    return match["ipv6"] or match["name"]


def host_allowed(header: str, local_address: str, names: frozenset[str]) -> bool:
    """Whether a request's Host names this machine: the address the client reached (the connection's local
    address, whatever the server is bound to) or one of its names. A DNS-rebinding page names its own host."""
    host = _host_name(header)
    return host is not None and (host == local_address or host in names)


def machine_names() -> frozenset[str]:
    """The names by which a browser on this machine or the network may reach it, and the loopback ones."""
    return frozenset(name.lower() for name in ("localhost", "127.0.0.1", "::1", socket.gethostname(),
                                               socket.getfqdn()))


def body_length(headers: Message) -> int:
    """The bytes of a request's body, which one Content-Length must announce; ApiError otherwise."""
    if headers.get_all("Transfer-Encoding"):
        raise ApiError(411, "send the body with a Content-Length; Transfer-Encoding is not accepted")
    lengths = headers.get_all("Content-Length") or ["0"]
    if len(lengths) > 1:
        raise ApiError(400, f"send one Content-Length, not {len(lengths)}")
    text = lengths[0].strip()
    if not (text.isascii() and text.isdigit()):  # isdigit() alone takes '²', which int() refuses
        raise ApiError(400, "bad Content-Length")
    # The digits are counted first: int() refuses more than 4,300 of them.
    if len(text) > len(str(MAX_BODY_BYTES)) or int(text) > MAX_BODY_BYTES:
        raise ApiError(413, f"request body over {MAX_BODY_BYTES} bytes")
    return int(text)


def _announced_length(head: bytes) -> int:
    """The bytes of the body to wait for after a request's head: none when the handler will refuse its framing
    (or its head) without reading one."""
    with contextlib.suppress(http.client.HTTPException, ApiError):
        return body_length(http.client.parse_headers(io.BytesIO(head.partition(b"\n")[2])))
    return 0


@dataclass(eq=False)
class _Arrival:
    """A connection still sending its request: what it has sent, when it connected and when it last sent."""

    sock: socket.socket
    address: Any
    connected: float
    heard: float
    data: bytearray = field(default_factory=bytearray)
    length: int | None = None  # the whole request's bytes, once its head is in

    def expiry(self, limits: Limits) -> float:
        return min(self.heard + limits.connection_timeout, self.connected + limits.request_deadline)


class _Reception:
    """One thread reading every connection until its request is all in (see the module doc), then handing it
    to PlayServer.answer: a client that sends slowly holds a buffer here, never a thread."""

    def __init__(self, server: PlayServer) -> None:
        self.server = server
        self.limits = server.limits
        self.arrivals: dict[socket.socket, _Arrival] = {}  # in the order they connected
        self.new: queue.SimpleQueue[tuple[socket.socket, Any]] = queue.SimpleQueue()
        self.selector = selectors.DefaultSelector()
        # The accepting thread wakes the selector through this pair when it queues a connection.
        self.wake_in, self.wake_out = socket.socketpair()
        self.wake_in.setblocking(False)
        self.wake_out.setblocking(False)
        self.selector.register(self.wake_out, selectors.EVENT_READ)
        self.closing = False
        self.thread = threading.Thread(target=self._run, name="play-server-reception", daemon=True)
        self.thread.start()

    def add(self, sock: socket.socket, address: Any) -> None:
        self.new.put((sock, address))
        self._wake()

    def close(self) -> None:
        self.closing = True
        self._wake()
        self.thread.join()
        for arrival in list(self.arrivals.values()):
            self._drop(arrival)
        while not self.new.empty():
            sock, _ = self.new.get()
            sock.close()
        self.selector.close()
        self.wake_in.close()
        self.wake_out.close()

    def _wake(self) -> None:
        with contextlib.suppress(BlockingIOError):  # a full pair has a wake-up waiting already
            self.wake_in.send(b"\0")

    def _run(self) -> None:
        while not self.closing:
            timeout = None
            if self.arrivals:
                timeout = max(0.0, min(a.expiry(self.limits) for a in self.arrivals.values()) - time.monotonic())
            for key, _ in self.selector.select(timeout):
                if key.data is None:
                    self._admit_new()
                elif key.data.sock in self.arrivals:  # not cut off by a newer one in this same round
                    try:
                        self._read(key.data)
                    except Exception:  # a bug: it loses this request, not the server every other one
                        traceback.print_exc()
                        if key.data.sock in self.arrivals:
                            self._drop(key.data)
            now = time.monotonic()
            for arrival in [a for a in self.arrivals.values() if a.expiry(self.limits) <= now]:
                self._drop(arrival)

    def _admit_new(self) -> None:
        with contextlib.suppress(BlockingIOError):
            while self.wake_out.recv(4096):
                pass
        while not self.new.empty():
            sock, address = self.new.get()
            if len(self.arrivals) + self.server.answering >= self.limits.max_connections:
                if not self.arrivals:  # every connection is being answered
                    self._refuse(sock, _BUSY)
                    continue
                self._drop(next(iter(self.arrivals.values())))  # the one that has waited longest
            sock.setblocking(False)
            now = time.monotonic()
            arrival = _Arrival(sock, address, now, now)
            self.arrivals[sock] = arrival
            self.selector.register(sock, selectors.EVENT_READ, arrival)

    def _read(self, arrival: _Arrival) -> None:
        try:
            chunk = arrival.sock.recv(16 * 1024)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:  # reset: the client went away
            chunk = b""
        if not chunk:
            self._drop(arrival)
            return
        arrival.data += chunk
        arrival.heard = time.monotonic()
        if arrival.length is None:
            end = _HEAD_END.search(arrival.data)
            if end is None:
                if len(arrival.data) > MAX_HEAD_BYTES:
                    self._forget(arrival)
                    self._refuse(arrival.sock, _HEAD_TOO_LONG)
                return
            arrival.length = end.end() + _announced_length(bytes(arrival.data[:end.end()]))
        if len(arrival.data) >= arrival.length:
            self._forget(arrival)
            if not self.server.answer(arrival.sock, arrival.address, bytes(arrival.data)):
                self._refuse(arrival.sock, _BUSY)

    def _forget(self, arrival: _Arrival) -> None:
        del self.arrivals[arrival.sock]
        self.selector.unregister(arrival.sock)

    def _drop(self, arrival: _Arrival) -> None:
        self._forget(arrival)
        arrival.sock.close()

    @staticmethod
    def _refuse(sock: socket.socket, answer: bytes) -> None:
        with contextlib.suppress(OSError):  # a client gone already needs no answer
            sock.send(answer)  # a few hundred bytes: the socket's buffer takes them whole
        sock.close()


class PlayServer(HTTPServer):
    """The HTTP server with the engine and the games in play (the module doc gives the limits and locks)."""

    # The listen backlog: at the default 5, a burst of connections waits out a one-second SYN retry each
    # beyond it, before the connection limit can even answer them.
    request_queue_size = 64

    def __init__(self, engine: Engine, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
                 limits: Limits = Limits()) -> None:
        check_settings(limits)
        super().__init__((host, port), PlayHandler)
        self.engine = engine
        self.limits = limits
        self.games: OrderedDict[str, _Entry] = OrderedDict()  # least recently used first
        self.games_lock = threading.Lock()  # the table only: held for lookups and inserts, never a search
        self.engine_lock = threading.Lock()  # the engine is not thread-safe
        self.names = machine_names() | {self.server_address[0]}  # 0.0.0.0 too: `url` names it
        self.answering = 0  # requests being answered, each by a thread of its own
        self._answering_lock = threading.Lock()
        self.verbose = False  # log every request to stderr
        self.page = resources.files("play").joinpath("web/index.html").read_bytes()
        self.board = Board(engine, self.engine_lock, limits.max_jobs, limits.max_jobs_per_address,
                           limits.job_idle_seconds)
        self._reception = _Reception(self)

    def process_request(self, request: Any, client_address: Any) -> None:
        self._reception.add(request, client_address)

    def answer(self, sock: socket.socket, client_address: Any, received: bytes) -> bool:
        """Answer a request that is all in (`received`) on a thread of its own; False when too many are being
        answered already."""
        with self._answering_lock:
            if self.answering >= self.limits.max_answering:
                return False
            self.answering += 1
        try:
            threading.Thread(target=self._answer, args=(sock, client_address, received), daemon=True).start()
        except RuntimeError:  # the system has no thread to spare: busy, as at the limit
            with self._answering_lock:
                self.answering -= 1
            return False
        return True

    def _answer(self, sock: socket.socket, client_address: Any, received: bytes) -> None:
        try:
            PlayHandler(sock, client_address, self, received)
        except Exception:
            self.handle_error(sock, client_address)
        finally:
            self.shutdown_request(sock)
            with self._answering_lock:
                self.answering -= 1

    def server_close(self) -> None:
        self._reception.close()
        super().server_close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return  # the client closed the connection or stalled before its answer: nothing went wrong here
        super().handle_error(request, client_address)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/"

    def entry(self, game_id: str) -> _Entry:
        with self.games_lock:
            entry = self.games.get(game_id)
            if entry is None:
                raise ApiError(404, f"no game {game_id!r} (the server may have restarted, or made room after it "
                                    f"went {self.limits.game_idle_seconds / 60:g} minutes unused, or "
                                    f"{self.limits.unplayed_game_seconds:g} s before its first move: start a new game)")
            entry.last_used = time.monotonic()
            self.games.move_to_end(game_id)
            return entry

    def _make_room(self, client: str, address: str) -> None:
        """Drop the game a new one from `client` at `address` replaces (see the module doc), or refuse it."""
        limits = self.limits
        mine = [gid for gid, e in self.games.items() if e.client == client]
        here = [gid for gid, e in self.games.items() if e.address == address]
        if len(mine) >= limits.max_games_per_client:
            candidates, status = mine, 429
            message = f"you have {len(mine)} games in play, the most one client may have"
        elif len(here) >= limits.max_games_per_address:
            candidates, status = here, 429
            message = f"your address has {len(here)} games in play, the most one address may have"
        elif len(self.games) >= limits.max_games:
            candidates, status = list(self.games), 503
            message = f"the server has {len(self.games)} games in play, the most it keeps"
        else:
            return
        now = time.monotonic()

        def free(entry: _Entry) -> bool:
            idle = now - entry.last_used
            return idle >= limits.game_idle_seconds or not entry.played and idle >= limits.unplayed_game_seconds

        victim = next((gid for gid in candidates if free(self.games[gid])), None)  # least recently used first
        if victim is None:
            raise ApiError(status, f"{message}; a game unused for {limits.game_idle_seconds / 60:g} minutes, or one "
                                   f"never played for {limits.unplayed_game_seconds:g} s, makes room for a new one")
        del self.games[victim]

    def new_game(self, body: dict[str, Any], client: str, address: str) -> dict[str, Any]:
        fields = _fields(body, {"color": str, "level": str, "sims": int, "depth": int, "fen": str})
        color = fields.get("color", "black")
        if color not in ("black", "white"):
            raise ApiError(400, f"color must be black or white, not {color!r}")
        level, budget = _budget(fields, self.engine.kind)
        start = Position.initial()
        if fields.get("fen", "").strip():
            try:
                start = fen_to_position(fields["fen"])
            except NotationError as exc:
                raise ApiError(400, str(exc)) from None
        game_id = secrets.token_hex(8)
        game = HumanGame(self.engine, color == "black", budget, level=level, start=start)
        entry = _Entry(game, client, address)
        with self.games_lock:
            self._make_room(client, address)
            self.games[game_id] = entry
        return game_state(game_id, entry.game)  # no other request knows the new id yet

    def game_action(self, game_id: str, action: str, body: dict[str, Any]) -> dict[str, Any]:
        entry = self.entry(game_id)
        searching = self.engine_lock if action in _ENGINE_ACTIONS else contextlib.nullcontext()
        with entry.lock, searching:
            state = self._game_action(game_id, entry.game, action, body)
            # Only now: a request refused (malformed, illegal, not possible now) changed nothing, and counted
            # as play it would keep a forged game from making room for a person's.
            entry.played = True
            return state

    def _game_action(self, game_id: str, s: HumanGame, action: str, body: dict[str, Any]) -> dict[str, Any]:
        extra: dict[str, Any] = {}
        if action == "move":
            fields = _fields(body, {"path": list, "move": str})
            if ("path" in fields) == ("move" in fields):
                raise ApiError(400, "give the move as either path (a list of squares) or move (text)")
            if "move" in fields:
                s.play_text(fields["move"])
            else:
                path = fields["path"]
                if len(path) < 2 or not all(isinstance(sq, int) and not isinstance(sq, bool) and 1 <= sq <= 32
                                            for sq in path):
                    raise ApiError(400, "path must be a list of at least two squares 1-32")
                s.play_path(path)
        elif action == "level":
            level, budget = _budget(_fields(body, {"level": str, "sims": int, "depth": int}), self.engine.kind)
            s.level, s.budget = level, budget
        else:
            _fields(body, {})
            if action == "engine":
                s.engine_move()
            elif action == "undo":
                s.undo()
            elif action == "hint":
                extra["hint"] = s.hint()
            elif action == "draw":
                extra["draw_accepted"], extra["engine_score"] = s.offer_draw()
            elif action == "resign":
                s.resign()
            else:
                raise ApiError(404, f"no action {action!r}")
        return {**game_state(game_id, s), **extra}

    def handle_api(self, method: str, parts: list[str], body: dict[str, Any] | None,
                   client: str, address: str) -> dict[str, Any] | str:
        """Route one API call from `client` (a browser session, or the address of a program without one) at
        `address`; returns JSON data, or text for the PDN download."""
        try:
            return self._route(method, parts, body, client, address)
        except NotationError as exc:
            raise ApiError(422, str(exc)) from None
        except (PlayError, EngineError) as exc:
            raise ApiError(409, str(exc)) from None

    def _route(self, method: str, parts: list[str], body: dict[str, Any] | None,
               client: str, address: str) -> dict[str, Any] | str:
        if parts == ["info"]:
            _allow(method, "GET")
            return {
                "levels": [{"name": lv.name, "simulations": lv.simulations, "depth": lv.depth,
                            "description": lv.description} for lv in LEVELS.values()],
                "searches": "depth" if self.engine.kind == ALPHABETA else "sims",
                "default_level": DEFAULT_LEVEL,
                "engine": self.engine.name,
            }
        if parts == ["games"]:
            _allow(method, "POST")
            return self.new_game(body or {}, client, address)
        if len(parts) == 2 and parts[0] == "games":
            _allow(method, "GET")
            entry = self.entry(parts[1])
            with entry.lock:
                return game_state(parts[1], entry.game)
        if len(parts) == 3 and parts[0] == "games" and parts[2] == "pdn":
            _allow(method, "GET")
            entry = self.entry(parts[1])
            with entry.lock:
                return entry.game.pdn()
        if len(parts) == 3 and parts[0] == "games":
            _allow(method, "POST")
            return self.game_action(parts[1], parts[2], body or {})
        if parts and parts[0] in ("line", "pdn", "analyses", "reviews"):
            return self._board_route(method, parts, body or {}, client, address)
        raise ApiError(404, f"no such API path /api/{'/'.join(parts)}")


    def _board_route(self, method: str, parts: list[str], body: dict[str, Any], client: str,
                     address: str) -> dict[str, Any]:
        """The analysis board's calls (play.analysis_board; docs/play.md lists them)."""
        if len(parts) == 1:
            _allow(method, "POST")
        if parts == ["line"]:
            fields = _fields(body, {"fen": str, "moves": list})
            return line_json(position_of(fields.get("fen", "").strip(), _move_texts(fields)))
        if parts == ["pdn"]:
            games, skipped = [], []
            for item in read_pdn_text(_fields(body, {"pdn": str}).get("pdn", "")):
                (skipped if isinstance(item, PdnError) else games).append(item)
            return {"games": [pdn_game_json(g) for g in games], "skipped": [str(e) for e in skipped]}
        if parts == ["analyses"]:
            fields = _fields(body, {"fen": str, "moves": list, "sims": int, "top": int})
            game = position_of(fields.get("fen", "").strip(), _move_texts(fields))
            top = fields.get("top", 5)
            if not 1 <= top <= 32:
                raise ApiError(400, "top must be between 1 and 32")
            return self.board.start_analysis(client, address, game, _simulations(fields, MAX_SIMULATIONS),
                                             top).json()
        if parts == ["reviews"]:
            fields = _fields(body, {"pdn": str, "game": int, "fen": str, "moves": list, "sims": int})
            default = LEVELS[DEFAULT_LEVEL].simulations
            return self.board.start_review(client, address, _game_to_review(fields),
                                           _simulations(fields, default)).json()
        kind = {"analyses": "analysis", "reviews": "review"}.get(parts[0])
        if kind and len(parts) == 2:
            _allow(method, "GET")
            return self.board.job(parts[1], kind).json()
        if kind and len(parts) == 3 and parts[2] == "stop":
            _allow(method, "POST")
            _fields(body, {})
            return self.board.stop(parts[1], kind).json()
        raise ApiError(404, f"no such API path /api/{'/'.join(parts)}")


def _game_to_review(fields: dict[str, Any]) -> PdnGame:
    """A review's game: game N (from 1) of PDN text, or a start (FEN) and moves."""
    if "pdn" in fields:
        if "fen" in fields or "moves" in fields:
            raise ApiError(400, "give either pdn (and game) or fen and moves, not both")
        items = list(read_pdn_text(fields["pdn"]))
        number = fields.get("game", 1)
        if not 1 <= number <= len(items):
            raise ApiError(400, f"the PDN holds {len(items)} games: game must be between 1 and {len(items)}")
        if isinstance(items[number - 1], PdnError):
            raise ApiError(422, str(items[number - 1]))
        return items[number - 1]
    if "game" in fields:
        raise ApiError(400, "game names a game of the pdn field, which is missing")
    game = position_of(fields.get("fen", "").strip(), _move_texts(fields))
    return PdnGame(1, 1, {}, game.positions[0], list(game.moves), "*")


def _move_texts(fields: dict[str, Any]) -> list[str]:
    moves = fields.get("moves", [])
    if not all(isinstance(m, str) for m in moves):
        raise ApiError(400, "moves must be a list of moves in standard notation (\"11-15\", \"22x15\")")
    return moves


def _simulations(fields: dict[str, Any], default: int) -> int:
    """The body's sims (a search's simulations), or `default`; at most MAX_SIMULATIONS."""
    sims = fields.get("sims", default)
    if not 1 <= sims <= MAX_SIMULATIONS:
        raise ApiError(400, f"sims must be between 1 and {MAX_SIMULATIONS}")
    return sims


def _allow(method: str, expected: str) -> None:
    if method != expected:
        raise ApiError(405, f"use {expected} here, not {method}")


class PlayHandler(BaseHTTPRequestHandler):
    """One request, all in already (`received`: _Reception read it), answered on its own thread."""

    server: PlayServer
    server_version = "checkers-zero"

    def __init__(self, request: socket.socket, client_address: Any, server: PlayServer, received: bytes) -> None:
        self.received = received
        super().__init__(request, client_address, server)  # answers the request

    def setup(self) -> None:
        self.timeout = self.server.limits.connection_timeout  # read by the base class's setup: for the answer
        super().setup()
        self.rfile.close()  # the base class's reader: an open one would keep the socket open after close()
        self.rfile = io.BytesIO(self.received)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base class's name)
        if self.server.verbose:
            super().log_message(format, *args)

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def _serve(self, method: str) -> None:
        # A client gone by now raises here, and PlayServer.handle_error lets it go quietly.
        self._send(*self._answer(method))

    def _answer(self, method: str) -> tuple[int, bytes, str, dict[str, str]]:
        """(status, payload, content type, extra headers) for the request."""
        path = self.path.split("?", 1)[0]
        try:
            self._check_origin()
            length = body_length(self.headers)
            session = _SESSION.search(self.headers.get("Cookie") or "")
            if path in ("/", "/index.html"):
                _allow(method, "GET")
                # No Secure flag: the page is plain HTTP, and a label that grants nothing need not be kept secret.
                cookie = {} if session else {
                    "Set-Cookie": f"{SESSION_COOKIE}={secrets.token_hex(16)}; Path=/; HttpOnly; SameSite=Strict"}
                return 200, self.server.page, "text/html; charset=utf-8", cookie
            if not path.startswith("/api/"):
                raise ApiError(404, f"nothing at {path}")
            body = self._body(length) if method == "POST" else None
            address = self.client_address[0]
            client = f"session {session[1]}" if session else address
            result = self.server.handle_api(method, [p for p in path[5:].split("/") if p], body, client, address)
            if isinstance(result, str):
                game_id = path.split("/")[3]
                return (200, result.encode(), "application/x-chess-pdn; charset=utf-8",
                        {"Content-Disposition": f'attachment; filename="checkers-zero-{game_id}.pdn"'})
            return _json(200, result)
        except ApiError as exc:
            return _json(exc.status, {"error": exc.message})
        except Exception as exc:  # a bug, not a bad request: say so rather than drop the connection
            traceback.print_exc()
            return _json(500, {"error": f"internal error: {exc}"})

    def _check_origin(self) -> None:
        """Refuse requests that a web page from elsewhere could make through the person's browser.

        The Host must name this machine (see host_allowed). A POST must say it is JSON (with or without a
        body): a cross-site form or fetch cannot send that type without a CORS preflight, which this server
        never grants.
        """
        header = self.headers.get("Host") or ""
        if not host_allowed(header, self.connection.getsockname()[0], self.server.names):
            raise ApiError(403, f"this server answers only requests naming this machine (localhost, its name or "
                                f"address), not {header!r}")
        if self.command == "POST":
            content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
            if content_type != "application/json":
                raise ApiError(415, "send the body as Content-Type: application/json")

    def _body(self, length: int) -> dict[str, Any]:
        raw = self.rfile.read(length)
        if not raw.strip():
            return {}
        try:
            body = json.loads(raw)
        # ValueError covers bad UTF-8, bad JSON and integers too long to convert; RecursionError deep nesting.
        except (ValueError, RecursionError) as exc:
            raise ApiError(400, f"the body is not valid JSON: {exc}") from None
        if not isinstance(body, dict):
            raise ApiError(400, "the body must be a JSON object")
        return body

    def _send(self, status: int, payload: bytes, content_type: str, headers: dict[str, str]) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Cache-Control", "no-store")
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)


def _json(status: int, data: dict[str, Any]) -> tuple[int, bytes, str, dict[str, str]]:
    return status, json.dumps(data).encode(), "application/json", {}


def start_in_thread(engine: Engine, host: str = DEFAULT_HOST, port: int = 0,
                    limits: Limits = Limits()) -> tuple[PlayServer, Callable[[], None]]:
    """A server running in a background thread and the function that stops it (for tests and notebooks)."""
    server = PlayServer(engine, host, port, limits)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join()

    return server, stop
