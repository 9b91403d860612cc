"""Playing against a checkpoint in the browser (`checkers-zero serve`, play.cli.serve).

A small JSON API over the standard library's HTTP server, and one self-contained page (web/index.html)
that uses it. The server binds 127.0.0.1 unless told otherwise: it is a local toy, not a public service.

API (every body is a JSON object; unknown fields are refused):
    GET  /                          the page
    GET  /api/info                  levels, default level, checkpoint name
    POST /api/games                 new game {color?: black|white, level?: NAME, sims?: N, fen?: FEN} -> state
    GET  /api/games/ID              state
    POST /api/games/ID/move         {path: [squares]} or {move: "11-15"} -> state
    POST /api/games/ID/engine       the engine plays its move -> state (with its thinking)
    POST /api/games/ID/undo         take back the person's last move and the reply -> state
    POST /api/games/ID/hint         the engine's top moves for the person -> state with "hint"
    POST /api/games/ID/level        {level: NAME} or {sims: N} -> state
    POST /api/games/ID/draw         offer a draw -> state with "draw_accepted"
    POST /api/games/ID/resign       -> state
    GET  /api/games/ID/pdn          the record as a PDN file
A request that is malformed (400), names no game (404), is not possible now (409) or plays an illegal
move (422) gets that status and {"error": message}; the game is left as it was. POSTs must be sent as
application/json (415 otherwise) and the Host must name this machine (403): other web sites the person
visits cannot then drive the game through their browser, whatever address the server is bound to.

Limits (`Limits`), so that one client cannot take the server from the others:
- Work per request: a search is at most MAX_SIMULATIONS simulations (4 x the strongest level; more is a
  400). Searches share one engine and run one at a time; a request waits only for its own game and, when
  it searches, for the engine: the page, /api/info and other games' moves do not wait on a search.
- Games: a game in use is never dropped for another. A client (an address) holds at most
  `max_games_per_client` games and the server `max_games`; a new game beyond either replaces the least
  recently used one (the client's own, or anyone's) only when that one has been idle `game_idle_seconds`,
  and is refused otherwise (429, 503). Every program on this machine is one address: there a person's game
  is kept safe by being in use, not by the per-client count.
- Connections: at most `max_connections` at once (503 beyond), each closed after `connection_timeout`
  seconds without progress (a client that stalls mid-request or sits idle), or when a request (its line,
  headers and body) is not all in `request_deadline` seconds after the connection or the last answer: a
  client that trickles a header line now and then must not hold its slot for as long as it likes.
A client that goes away before its answer is not an error: nothing is logged for it.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import secrets
import socket
import sys
import threading
import time
import traceback
from collections import OrderedDict
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any, Callable

from zero.rules.game import Position
from zero.rules.notation import NotationError, fen_to_position
from zero.run.config import check_settings, setting
from play.engine import (
    DEFAULT_LEVEL, LEVELS, Budget, Engine, EngineError, budget_for,
)
from play.session import HumanGame, PlayError

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
MAX_BODY_BYTES = 64 * 1024
MAX_SIMULATIONS = 4 * max(level.simulations for level in LEVELS.values())
_ENGINE_ACTIONS = frozenset({"engine", "hint", "draw"})  # the game actions that search
_BUSY_BODY = b'{"error": "too many connections at once; try again"}'
_BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\n"
         b"Content-Length: %d\r\n\r\n%s" % (len(_BUSY_BODY), _BUSY_BODY))


@dataclass(frozen=True)
class Limits:
    """What one server lets its clients take (see the module doc)."""

    max_games: int = setting(256, low=1)
    max_games_per_client: int = setting(64, low=1)
    game_idle_seconds: float = setting(1800.0, low=0)
    max_connections: int = setting(32, low=1)
    connection_timeout: float = setting(30.0, above=0)
    # A browser sends a request in milliseconds; this is for slow networks, not slow clients.
    request_deadline: float = setting(10.0, above=0)


@dataclass
class _Entry:
    """A game in play, who made it, when it was last asked for, and the lock its requests take in turn."""

    game: HumanGame
    client: str
    last_used: float = field(default_factory=time.monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock)


class ApiError(Exception):
    """A request the API refuses: HTTP status and a message for the person."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


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


def _budget(fields: dict[str, Any]) -> tuple[str | None, Budget]:
    level, sims = fields.get("level"), fields.get("sims")
    if level is not None and sims is not None:
        raise ApiError(400, "give either level or sims, not both")
    if sims is not None and not 1 <= sims <= MAX_SIMULATIONS:
        raise ApiError(400, f"sims must be between 1 and {MAX_SIMULATIONS}")
    if level is not None and level not in LEVELS:
        raise ApiError(400, f"unknown level {level!r}; levels: {', '.join(LEVELS)}")
    if sims is not None:
        return None, budget_for(simulations=sims)
    return level or DEFAULT_LEVEL, budget_for(level or DEFAULT_LEVEL)


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


class PlayServer(ThreadingHTTPServer):
    """The HTTP server with the engine and the games in play (the module doc gives the limits and locks)."""

    daemon_threads = True
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
        self._connection_slots = threading.BoundedSemaphore(limits.max_connections)
        self.verbose = False  # log every request to stderr
        self.page = resources.files("play").joinpath("web/index.html").read_bytes()

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._connection_slots.acquire(blocking=False):
            # Answered and closed at once: a thread each for hundreds of idle connections is what this avoids.
            with contextlib.suppress(OSError):
                request.sendall(_BUSY)
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._connection_slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._connection_slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return  # the client closed the connection or stalled: nothing went wrong here
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
                                    f"went {self.limits.game_idle_seconds / 60:g} minutes unused: start a new game)")
            entry.last_used = time.monotonic()
            self.games.move_to_end(game_id)
            return entry

    def _make_room(self, client: str) -> None:
        """Drop the game a new one from `client` replaces (see the module doc), or refuse it."""
        limits = self.limits
        mine = [gid for gid, e in self.games.items() if e.client == client]
        if len(mine) >= limits.max_games_per_client:
            victim, status = mine[0], 429
            message = f"you have {len(mine)} games in play, the most one client may have"
        elif len(self.games) >= limits.max_games:
            victim, status = next(iter(self.games)), 503
            message = f"the server has {len(self.games)} games in play, the most it keeps"
        else:
            return
        if time.monotonic() - self.games[victim].last_used < limits.game_idle_seconds:
            raise ApiError(status, f"{message}; a game unused for {limits.game_idle_seconds / 60:g} minutes "
                                   "makes room for a new one")
        del self.games[victim]

    def new_game(self, body: dict[str, Any], client: str) -> dict[str, Any]:
        fields = _fields(body, {"color": str, "level": str, "sims": int, "fen": str})
        color = fields.get("color", "black")
        if color not in ("black", "white"):
            raise ApiError(400, f"color must be black or white, not {color!r}")
        level, budget = _budget(fields)
        start = Position.initial()
        if fields.get("fen", "").strip():
            try:
                start = fen_to_position(fields["fen"])
            except NotationError as exc:
                raise ApiError(400, str(exc)) from None
        game_id = secrets.token_hex(8)
        entry = _Entry(HumanGame(self.engine, color == "black", budget, level=level, start=start), client)
        with self.games_lock:
            self._make_room(client)
            self.games[game_id] = entry
        return game_state(game_id, entry.game)  # no other request knows the new id yet

    def game_action(self, game_id: str, action: str, body: dict[str, Any]) -> dict[str, Any]:
        entry = self.entry(game_id)
        searching = self.engine_lock if action in _ENGINE_ACTIONS else contextlib.nullcontext()
        with entry.lock, searching:
            return self._game_action(game_id, entry.game, action, body)

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
            level, budget = _budget(_fields(body, {"level": str, "sims": int}))
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
                   client: str) -> dict[str, Any] | str:
        """Route one API call from the client at address `client`; returns JSON data, or text for the PDN
        download."""
        try:
            return self._route(method, parts, body, client)
        except NotationError as exc:
            raise ApiError(422, str(exc)) from None
        except (PlayError, EngineError) as exc:
            raise ApiError(409, str(exc)) from None

    def _route(self, method: str, parts: list[str], body: dict[str, Any] | None,
               client: str) -> dict[str, Any] | str:
        if parts == ["info"]:
            _allow(method, "GET")
            return {
                "levels": [{"name": lv.name, "simulations": lv.simulations, "description": lv.description}
                           for lv in LEVELS.values()],
                "default_level": DEFAULT_LEVEL,
                "engine": self.engine.name,
            }
        if parts == ["games"]:
            _allow(method, "POST")
            return self.new_game(body or {}, client)
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
        raise ApiError(404, f"no such API path /api/{'/'.join(parts)}")


def _allow(method: str, expected: str) -> None:
    if method != expected:
        raise ApiError(405, f"use {expected} here, not {method}")


class _DeadlineReader(io.RawIOBase):
    """A connection's bytes, read with the connection's timeout but never past `deadline` (time.monotonic):
    the socket timeout alone restarts with every byte that arrives."""

    def __init__(self, sock: socket.socket, timeout: float) -> None:
        super().__init__()
        self.sock = sock
        self.timeout = timeout
        self.deadline = float("inf")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request was not all sent within its deadline")
        self.sock.settimeout(min(self.timeout, left))
        try:
            return self.sock.recv_into(buffer)
        finally:
            self.sock.settimeout(self.timeout)  # the answer is written with the connection's own timeout


class PlayHandler(BaseHTTPRequestHandler):
    server: PlayServer
    server_version = "checkers-zero"

    def setup(self) -> None:
        self.timeout = self.server.limits.connection_timeout  # read by the base class's setup
        super().setup()
        self.rfile.close()  # the base class's reader: an open one would keep the socket open after close()
        self._reader = _DeadlineReader(self.connection, self.timeout)
        self.rfile = io.BufferedReader(self._reader)

    def handle_one_request(self) -> None:
        # The base class drops the connection on the TimeoutError a late request raises, quietly.
        self._reader.deadline = time.monotonic() + self.server.limits.request_deadline
        super().handle_one_request()

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
        try:
            answer = self._answer(method)
        except (ConnectionError, TimeoutError):  # the client went away or stalled while sending its body
            self.close_connection = True
            return
        # A client gone by now raises here, and PlayServer.handle_error lets it go quietly.
        self._send(*answer)

    def _answer(self, method: str) -> tuple[int, bytes, str, dict[str, str]]:
        """(status, payload, content type, extra headers) for the request."""
        path = self.path.split("?", 1)[0]
        try:
            self._check_origin()
            if path in ("/", "/index.html"):
                _allow(method, "GET")
                return 200, self.server.page, "text/html; charset=utf-8", {}
            if not path.startswith("/api/"):
                raise ApiError(404, f"nothing at {path}")
            body = self._body() if method == "POST" else None
            result = self.server.handle_api(method, [p for p in path[5:].split("/") if p], body,
                                            self.client_address[0])
            if isinstance(result, str):
                game_id = path.split("/")[3]
                return (200, result.encode(), "application/x-chess-pdn; charset=utf-8",
                        {"Content-Disposition": f'attachment; filename="checkers-zero-{game_id}.pdn"'})
            return _json(200, result)
        except ApiError as exc:
            return _json(exc.status, {"error": exc.message})
        except (ConnectionError, TimeoutError):
            raise  # not a bug: _serve closes the connection
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

    def _body(self) -> dict[str, Any]:
        length_text = (self.headers.get("Content-Length") or "0").strip()
        if not (length_text.isascii() and length_text.isdigit()):  # isdigit() alone takes '²', which int() refuses
            raise ApiError(400, "bad Content-Length")
        # The digits are counted first: int() refuses more than 4,300 of them.
        if len(length_text) > len(str(MAX_BODY_BYTES)) or int(length_text) > MAX_BODY_BYTES:
            raise ApiError(413, f"request body over {MAX_BODY_BYTES} bytes")
        raw = self.rfile.read(int(length_text))
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
