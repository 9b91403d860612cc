"""`checkers-zero serve`: play against a checkpoint in the browser.

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
application/json (415 otherwise) and, on a loopback address, the Host must be this machine (403): other
web sites the person visits cannot then drive the game through their browser.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import secrets
import sys
import threading
import traceback
from collections import OrderedDict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any, Callable

from zero.game import Position
from zero.notation import NotationError, fen_to_position
from play.engine import DEFAULT_LEVEL, LEVELS, Budget, Engine, EngineError, budget_for
from play.session import HumanGame, PlayError

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
MAX_BODY_BYTES = 64 * 1024
MAX_GAMES = 64  # games kept in memory; the least recently used is dropped beyond this
MAX_SIMULATIONS = 100_000


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
            raise ApiError(400, f"field {name!r} must be {names}, not {json.dumps(value)[:40]}")
    return body


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


class PlayServer(ThreadingHTTPServer):
    """The HTTP server with the engine and the games in play. One lock serialises all game actions: the
    engine is not thread-safe and a person plays one move at a time anyway."""

    daemon_threads = True

    def __init__(self, engine: Engine, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT) -> None:
        super().__init__((host, port), PlayHandler)
        self.engine = engine
        self.games: OrderedDict[str, HumanGame] = OrderedDict()
        self.lock = threading.Lock()
        self.verbose = False  # log every request to stderr
        self.page = resources.files("play").joinpath("web/index.html").read_bytes()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/"

    def game(self, game_id: str) -> HumanGame:
        if game_id not in self.games:
            raise ApiError(404, f"no game {game_id!r} (the server may have restarted: start a new game)")
        self.games.move_to_end(game_id)
        return self.games[game_id]

    def new_game(self, body: dict[str, Any]) -> dict[str, Any]:
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
        self.games[game_id] = HumanGame(self.engine, color == "black", budget, level=level, start=start)
        while len(self.games) > MAX_GAMES:
            self.games.popitem(last=False)
        return game_state(game_id, self.games[game_id])

    def game_action(self, game_id: str, action: str, body: dict[str, Any]) -> dict[str, Any]:
        s = self.game(game_id)
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

    def handle_api(self, method: str, parts: list[str], body: dict[str, Any] | None) -> dict[str, Any] | str:
        """Route one API call; returns JSON data, or text for the PDN download."""
        with self.lock:
            try:
                return self._route(method, parts, body)
            except NotationError as exc:
                raise ApiError(422, str(exc)) from None
            except (PlayError, EngineError) as exc:
                raise ApiError(409, str(exc)) from None

    def _route(self, method: str, parts: list[str], body: dict[str, Any] | None) -> dict[str, Any] | str:
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
            return self.new_game(body or {})
        if len(parts) == 2 and parts[0] == "games":
            _allow(method, "GET")
            return game_state(parts[1], self.game(parts[1]))
        if len(parts) == 3 and parts[0] == "games" and parts[2] == "pdn":
            _allow(method, "GET")
            return self.game(parts[1]).pdn()
        if len(parts) == 3 and parts[0] == "games":
            _allow(method, "POST")
            return self.game_action(parts[1], parts[2], body or {})
        raise ApiError(404, f"no such API path /api/{'/'.join(parts)}")


def _allow(method: str, expected: str) -> None:
    if method != expected:
        raise ApiError(405, f"use {expected} here, not {method}")


class PlayHandler(BaseHTTPRequestHandler):
    server: PlayServer
    server_version = "checkers-zero"

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
        path = self.path.split("?", 1)[0]
        try:
            self._check_origin()
            if path in ("/", "/index.html"):
                _allow(method, "GET")
                self._send(200, self.server.page, "text/html; charset=utf-8")
                return
            if not path.startswith("/api/"):
                raise ApiError(404, f"nothing at {path}")
            body = self._body() if method == "POST" else None
            result = self.server.handle_api(method, [p for p in path[5:].split("/") if p], body)
            if isinstance(result, str):
                game_id = path.split("/")[3]
                self._send(200, result.encode(), "application/x-chess-pdn; charset=utf-8",
                           {"Content-Disposition": f'attachment; filename="checkers-zero-{game_id}.pdn"'})
            else:
                self._json(200, result)
        except ApiError as exc:
            self._json(exc.status, {"error": exc.message})
        except ConnectionError:  # the browser went away (page closed or reloaded) before the answer
            self.close_connection = True
        except Exception as exc:  # a bug, not a bad request: say so rather than drop the connection
            traceback.print_exc()
            self._json(500, {"error": f"internal error: {exc}"})

    def _check_origin(self) -> None:
        """Refuse requests that a web page from elsewhere could make through the person's browser.

        On a loopback address the Host must name this machine (a DNS-rebinding page names its own host).
        A POST must say it is JSON (with or without a body): a cross-site form or fetch cannot send that
        type without a CORS preflight, which this server never grants.
        """
        if ipaddress.ip_address(self.server.server_address[0]).is_loopback:
            host = (self.headers.get("Host") or "").rsplit(":", 1)[0].strip("[]").lower()
            if host not in ("localhost", "127.0.0.1", "::1"):
                raise ApiError(403, f"this server answers only requests for localhost, not {host!r}")
        if self.command == "POST":
            content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
            if content_type != "application/json":
                raise ApiError(415, "send the body as Content-Type: application/json")

    def _body(self) -> dict[str, Any]:
        length_text = self.headers.get("Content-Length") or "0"
        if not length_text.isdigit():
            raise ApiError(400, "bad Content-Length")
        length = int(length_text)
        if length > MAX_BODY_BYTES:
            raise ApiError(413, f"request body over {MAX_BODY_BYTES} bytes")
        raw = self.rfile.read(length)
        if not raw.strip():
            return {}
        try:
            body = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ApiError(400, f"the body is not valid JSON: {exc}") from None
        if not isinstance(body, dict):
            raise ApiError(400, "the body must be a JSON object")
        return body

    def _json(self, status: int, data: dict[str, Any]) -> None:
        self._send(status, json.dumps(data).encode(), "application/json")

    def _send(self, status: int, payload: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Cache-Control", "no-store")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--checkpoint", metavar="PATH", help="network to play against (default: the shipped one)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port to listen on (default {DEFAULT_PORT}; 0 = any free port)")
    parser.add_argument("--host", default=DEFAULT_HOST,
                        help=f"address to bind (default {DEFAULT_HOST}: this machine only)")
    parser.add_argument("--verbose", action="store_true", help="log every request")


def run(args: argparse.Namespace) -> int:
    try:
        engine = Engine.load(args.checkpoint)
    except EngineError as exc:
        print(f"checkers-zero serve: {exc}", file=sys.stderr)
        return 2
    try:
        server = PlayServer(engine, args.host, args.port)
    except OSError as exc:
        print(f"checkers-zero serve: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 2
    server.verbose = args.verbose
    print(f"Playing {engine.name}: open {server.url} in your browser (Ctrl+C to stop)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("stopped")
    finally:
        server.server_close()
    return 0


def start_in_thread(engine: Engine, host: str = DEFAULT_HOST, port: int = 0) -> tuple[PlayServer, Callable[[], None]]:
    """A server running in a background thread and the function that stops it (for tests and notebooks)."""
    server = PlayServer(engine, host, port)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join()

    return server, stop
