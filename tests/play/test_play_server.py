"""The play server's JSON API: games, moves, engine replies, undo, and refusals that leave the game as it was."""

from __future__ import annotations

import contextlib
import http.client
import json
import secrets
import socket
import struct
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from play.cli.main import build_parser, main
from play.engine import Engine, MctsEngine
from zero.corpus.pdn import PdnGame, read_pdn_text
from zero.run.config import ConfigError
from play.server import (DEFAULT_HOST, MAX_SIMULATIONS, Limits, PlayServer, host_allowed, machine_names,
                         start_in_thread)


@pytest.fixture(scope="module")
def server(engine):
    """The server most tests share; they make more games from one address than a person would."""
    srv, stop = start_in_thread(engine, limits=Limits(max_games=1000, max_games_per_client=1000,
                                                      max_games_per_address=1000))
    yield srv
    stop()


@contextmanager
def serving(engine, limits: Limits = Limits()):
    """A server of its own for a test that fills or stalls it."""
    srv, stop = start_in_thread(engine, limits=limits)
    try:
        yield srv
    finally:
        stop()


def call(server, method: str, path: str, body=None, raw: bytes | None = None,
         headers: dict[str, str] | None = None, client: str = "127.0.0.1",
         timeout: float = 60) -> tuple[int, dict | str]:
    """One request; `client` is the loopback address it comes from (127.0.0.0/8 all reach the server)."""
    host, port = server.server_address[:2]
    conn = http.client.HTTPConnection(host, port, timeout=timeout, source_address=(client, 0))
    payload = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    conn.request(method, path, body=payload, headers=headers or {"Content-Type": "application/json"})
    res = conn.getresponse()
    data = res.read().decode()
    conn.close()
    if res.getheader("Content-Type", "").startswith("application/json"):
        return res.status, json.loads(data)
    return res.status, data


def new_game(server, client: str = "127.0.0.1", **fields) -> dict:
    status, state = call(server, "POST", "/api/games", fields or {"level": "beginner"}, client=client)
    assert status == 200, state
    return state


def test_binds_loopback_by_default(engine):
    assert DEFAULT_HOST == "127.0.0.1"
    assert build_parser().parse_args(["serve"]).host == "127.0.0.1"
    srv = PlayServer(engine, port=0)
    try:
        assert srv.server_address[0] == "127.0.0.1"
    finally:
        srv.server_close()


@pytest.mark.parametrize("port", ["-1", "99999"])
def test_serve_refuses_a_port_out_of_range_in_one_line_before_loading(port, capsys):
    # Before: the network was loaded, then the socket raised OverflowError with a traceback.
    assert main(["serve", "--port", port]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == f"checkers-zero serve: --port {port}: a port is 0 (any free one) to 65535\n"


def test_serve_says_it_is_starting_before_it_loads_the_network(engine, monkeypatch, capsys):
    said_before_loading = []

    def load(cls, checkpoint=None, endgame_database=True, threads=1, opening_book=True):
        said_before_loading.append(capsys.readouterr().out)
        return engine

    def serve_forever(self):
        raise KeyboardInterrupt  # Ctrl+C as soon as it serves

    monkeypatch.setattr(Engine, "load", classmethod(load))
    monkeypatch.setattr(PlayServer, "serve_forever", serve_forever)
    assert main(["serve", "--port", "0"]) == 0
    assert said_before_loading == ["checkers-zero serve: loading the engine and preparing the search ...\n"]
    ready, stopped = capsys.readouterr().out.splitlines()
    assert ready.startswith(f"Playing {engine.name}: open http://127.0.0.1:") and stopped == "stopped"


def test_page_and_info(server):
    status, page = call(server, "GET", "/")
    assert status == 200 and "<title>Checkers Zero</title>" in page
    status, info = call(server, "GET", "/api/info")
    assert status == 200
    assert [lv["name"] for lv in info["levels"]] == ["beginner", "club", "expert", "master"]


def test_a_game_move_engine_reply_undo_and_pdn(server):
    state = new_game(server)
    assert state["human_to_move"] and len(state["legal_moves"]) == 7
    gid = state["id"]
    status, state = call(server, "POST", f"/api/games/{gid}/move", {"path": [11, 15]})
    assert status == 200 and state["engine_to_move"] and state["moves"] == ["11-15"]
    status, state = call(server, "POST", f"/api/games/{gid}/engine", {})
    assert status == 200 and state["human_to_move"] and len(state["moves"]) == 2
    thinking = state["thinking"]
    assert thinking["side"] == "white" and thinking["moves"][0]["move"] == state["moves"][1]
    status, state = call(server, "POST", f"/api/games/{gid}/move", {"move": state["legal_moves"][0]["move"]})
    assert status == 200 and len(state["moves"]) == 3
    status, pdn = call(server, "GET", f"/api/games/{gid}/pdn")
    assert status == 200
    (game,) = list(read_pdn_text(pdn))
    assert isinstance(game, PdnGame) and [str(m) for m in game.moves] == state["moves"]
    status, state = call(server, "POST", f"/api/games/{gid}/engine", {})
    status, state = call(server, "POST", f"/api/games/{gid}/undo", {})
    assert status == 200 and state["moves"] == [str(m) for m in game.moves[:2]]


def test_multi_jump_by_full_path_and_by_ends(multi_jump_fen, server):
    gid = new_game(server, fen=multi_jump_fen)["id"]
    status, state = call(server, "POST", f"/api/games/{gid}/move", {"path": [9, 18]})
    assert status == 422 and "illegal move 9-18" in state["error"]
    status, state = call(server, "POST", f"/api/games/{gid}/move", {"path": [9, 27]})
    assert status == 200 and state["moves"] == ["9x18x27"]


def test_hint_level_draw_resign(server):
    gid = new_game(server)["id"]
    status, state = call(server, "POST", f"/api/games/{gid}/hint", {})
    assert status == 200 and state["hint"]["side"] == "black" and state["hint"]["moves"]
    shares = [m["share"] for m in state["hint"]["moves"]]
    assert shares == sorted(shares, reverse=True) and 0 < sum(shares) <= 1.0001
    status, state = call(server, "POST", f"/api/games/{gid}/level", {"level": "club"})
    assert status == 200 and state["level"] == "club" and state["budget"] == "64 simulations"
    status, state = call(server, "POST", f"/api/games/{gid}/draw", {})
    assert status == 200 and isinstance(state["draw_accepted"], bool)
    assert state["over"] == state["draw_accepted"]
    if not state["over"]:
        status, state = call(server, "POST", f"/api/games/{gid}/resign", {})
        assert status == 200 and state["result"] == "0-1" and state["over"]
    status, state = call(server, "POST", f"/api/games/{gid}/undo", {})
    assert status == 200 and not state["over"]  # undo reopens a game ended by agreement or resignation


def test_a_draw_offered_on_the_engines_turn_is_refused(server):
    # Before: accepted or declined as on the person's turn; the page offers only on the person's turn, the API
    # did not hold to it.
    state = new_game(server, color="white", level="beginner")  # Black, the engine, moves first
    status, answer = call(server, "POST", f"/api/games/{state['id']}/draw", {})
    assert status == 409 and answer == {"error": "it is the engine's turn"}
    assert call(server, "GET", f"/api/games/{state['id']}") == (200, state)


@pytest.mark.parametrize(
    "method,path,body,status,message",
    [
        ("POST", "move", b"{bad json", 400, "not valid JSON"),
        ("POST", "move", b"[1, 2]", 400, "must be a JSON object"),
        ("POST", "move", b'{"path": [11, 15], "extra": 1}', 400, "unknown field"),
        ("POST", "move", b'{"path": "11-15"}', 400, "must be list"),
        ("POST", "move", b'{"path": [11, 99]}', 400, "squares 1-32"),
        ("POST", "move", b'{"path": [11, true]}', 400, "squares 1-32"),
        ("POST", "move", b'{"path": [11]}', 400, "at least two squares"),
        ("POST", "move", b'{}', 400, "either path"),
        ("POST", "move", b'{"move": "11-20"}', 422, "illegal move 11-20; legal moves: "),
        ("POST", "move", b'{"move": "eleven"}', 422, "not a move"),
        ("POST", "move", b'{"move": "11x15"}', 422, "11x15 is not a capture: write 11-15"),
        ("POST", "engine", b"{}", 409, "your turn"),
        ("POST", "undo", b"{}", 409, "no move of yours"),
        ("POST", "level", b'{"level": "grandmaster"}', 400, "unknown level"),
        ("POST", "level", b'{"sims": 0}', 400, "sims must be between"),
        ("POST", "level", b'{"sims": true}', 400, "must be int"),
        ("POST", "fly", b"{}", 404, "no action"),
        ("GET", "move", None, 405, "use POST"),
        ("POST", "pdn", b"{}", 405, "use GET"),
    ],
)
def test_bad_requests_get_4xx_and_leave_the_game_unchanged(server, method, path, body, status, message):
    state = new_game(server)
    gid = state["id"]
    got, answer = call(server, method, f"/api/games/{gid}/{path}", raw=body)
    assert got == status and message in answer["error"], answer
    assert call(server, "GET", f"/api/games/{gid}") == (200, state)


@pytest.mark.parametrize(
    "body,message",
    [({"color": "red"}, "color must be"), ({"fen": "B:W1:B2,"}, "white man on Black's back row"),
     ({"level": "club", "sims": 5}, "give one of level, sims and depth"), ({"colour": "black"}, "unknown field"),
     ({"depth": 8}, "this engine searches simulations: give sims or a level")],
)
def test_bad_new_game_requests(server, body, message):
    status, answer = call(server, "POST", "/api/games", body)
    assert status == 400 and message in answer["error"]


def test_unknown_game_and_path(server):
    assert call(server, "GET", "/api/games/nope")[0] == 404
    assert call(server, "GET", "/api/nothing")[0] == 404
    assert call(server, "GET", "/etc/passwd")[0] == 404


def test_oversized_body_is_refused(server):
    gid = new_game(server)["id"]
    status, answer = call(server, "POST", f"/api/games/{gid}/move", raw=b" " * (65 * 1024))
    assert status == 413


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-50, 50) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=8,
)
fields = st.dictionaries(st.sampled_from(["path", "move", "level", "sims", "color", "fen", "x"]), json_values,
                         max_size=3)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(action=st.sampled_from(["move", "level", "undo", "hint", "resign", "draw", "zzz"]), body=fields)
def test_no_request_body_gets_a_500(server, action, body):
    gid = new_game(server, sims=2)["id"]
    status, answer = call(server, "POST", f"/api/games/{gid}/{action}", body)
    assert status < 500, answer
    if status >= 400:
        assert answer["error"]


def test_requests_another_site_could_make_are_refused(server):
    state = new_game(server)
    gid = state["id"]
    status, answer = call(server, "POST", f"/api/games/{gid}/resign", raw=b"{}",
                          headers={"Content-Type": "text/plain"})  # a cross-site "simple" request
    assert status == 415 and "application/json" in answer["error"]
    status, answer = call(server, "POST", f"/api/games/{gid}/resign", raw=b"",
                          headers={"Content-Type": "application/json", "Host": "evil.example:8000"})
    assert status == 403 and "localhost" in answer["error"]  # DNS rebinding: the page names its own host
    assert call(server, "GET", "/", headers={"Host": "evil.example"})[0] == 403
    for host in ("localhost:1234", "127.0.0.1", f"{socket.gethostname()}:8000", "[::1]:8000"):
        assert call(server, "GET", f"/api/games/{gid}", headers={"Host": host}) == (200, state), host


def test_host_check_holds_on_any_bind():
    # Bound to 0.0.0.0, a connection's local address is the one the client reached: that and the machine's
    # names pass, any other name (a rebinding page's own) does not.
    names = machine_names() | {"0.0.0.0"}  # as PlayServer adds its bound address
    assert host_allowed("192.168.1.5:8000", "192.168.1.5", names)
    assert host_allowed("0.0.0.0:8000", "127.0.0.1", names)  # the address the server prints as its url
    assert host_allowed(socket.gethostname().upper(), "192.168.1.5", names)
    assert not host_allowed("evil.example:8000", "192.168.1.5", names)
    assert not host_allowed("10.0.0.9:8000", "192.168.1.5", names)
    assert not host_allowed("", "192.168.1.5", names)


@pytest.mark.parametrize("host", ["localhost:1@evil.com", "evil.com", "localhost:abc", "localhost:99999",
                                  "localhost:0", "localhost:", "localhost:8000:1", "localhost/x", "localhost 8000",
                                  "evil.com@localhost", "[::1", "::1:8000"])
def test_host_headers_that_are_not_exactly_host_and_port_are_refused(server, host):
    assert not host_allowed(host, "127.0.0.1", machine_names())
    assert call(server, "GET", "/api/info", headers={"Host": host})[0] == 403


@pytest.mark.parametrize("host", ["localhost:8000", "127.0.0.1:8000", "[::1]:8000", "localhost", "LocalHost:65535"])
def test_host_and_optional_port_of_this_machine_are_accepted(host):
    assert host_allowed(host, "127.0.0.1", machine_names())


# ------------------------------------------------------------------------------- hostile clients

@pytest.mark.parametrize(("raw", "headers", "status"), [
    (b'{"sims": ' + b"1" * 5000 + b"}", {}, 400),  # json refuses to convert over 4,300 digits
    (b"[" * 30_000 + b"]" * 30_000, {}, 400),  # nested deeper than the recursion limit
    (b"{}", {"Content-Length": "\u00b2"}, 400),  # a digit to str.isdigit, not to int
    (b"{}", {"Content-Length": "9" * 5000}, 413),
])
def test_hostile_bodies_get_4xx(server, raw, headers, status):
    conn = http.client.HTTPConnection(*server.server_address[:2], timeout=30)
    conn.putrequest("POST", "/api/games")
    for name, value in {"Host": "localhost", "Content-Type": "application/json",
                        "Content-Length": str(len(raw)), **headers}.items():
        conn.putheader(name, value)
    conn.endheaders(raw)
    res = conn.getresponse()
    answer = json.loads(res.read())
    conn.close()
    assert res.status == status, answer


def test_deep_values_in_fields_get_4xx(server):
    # Nesting just inside what the parser takes must not fail when the error message shows the value.
    gid = new_game(server)["id"]
    for depth in range(900, 1000, 4):
        status, answer = call(server, "POST", f"/api/games/{gid}/move", raw=b'{"move": %s}' % (
            b"[" * depth + b"]" * depth))
        assert 400 <= status < 500, (depth, answer)


def test_work_per_request_is_bounded(server):
    assert MAX_SIMULATIONS == 4096
    for sims in (MAX_SIMULATIONS + 1, 20_000, 100_000):
        status, answer = call(server, "POST", "/api/games", {"sims": sims})
        assert status == 400 and f"between 1 and {MAX_SIMULATIONS}" in answer["error"]
    gid = new_game(server, sims=MAX_SIMULATIONS)["id"]
    status, answer = call(server, "POST", f"/api/games/{gid}/level", {"sims": 20_000})
    assert status == 400 and call(server, "GET", f"/api/games/{gid}")[1]["budget"] == "4096 simulations"


class GatedEngine(MctsEngine):
    """The test's engine: each search waits until the test lets it go on (a search of any length)."""

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine.evaluator, engine.checkpoint, engine.search_config)
        self.searching = threading.Event()
        self.go_on = threading.Event()

    def _wait(self) -> None:
        self.searching.set()
        assert self.go_on.wait(60)

    def analyse(self, game, budget):
        self._wait()
        return super().analyse(game, budget)

    def choose(self, game, budget):  # the engine's move: a search of its own (forced moves aside)
        self._wait()
        return super().choose(game, budget)


def test_requests_that_need_no_engine_do_not_wait_on_a_search(engine):
    gated = GatedEngine(engine)
    with serving(gated) as srv:
        searched = new_game(srv, color="white", level="beginner")["id"]
        other = new_game(srv)["id"]
        answers = []
        mover = threading.Thread(target=lambda: answers.append(call(srv, "POST", f"/api/games/{searched}/engine", {})))
        mover.start()
        try:
            assert gated.searching.wait(30)
            started = time.monotonic()
            assert call(srv, "GET", "/api/info", timeout=5)[0] == 200
            assert call(srv, "GET", f"/api/games/{other}", timeout=5)[0] == 200
            assert call(srv, "POST", f"/api/games/{other}/move", {"path": [11, 15]}, timeout=5)[0] == 200
            assert call(srv, "POST", "/api/games", {"level": "club"}, timeout=5)[0] == 200
            assert time.monotonic() - started < 5
        finally:
            gated.go_on.set()
            mover.join(60)
        ((status, state),) = answers
        assert status == 200 and len(state["moves"]) == 1


def read_until_closed(sock: socket.socket, within: float) -> bytes:
    """What the server sends until it closes the connection; fails if it is still open after `within` s."""
    sock.settimeout(within)
    data = b""
    while chunk := sock.recv(4096):  # socket.timeout (a failure) if the server keeps it open
        data += chunk
    return data


def test_idle_and_stalled_connections_are_closed(engine):
    with serving(engine, Limits(connection_timeout=0.5)) as srv:
        stalls = [
            b"",  # connects and says nothing
            b"GET /api/info",  # a request line that never ends (as an HTTP/0.9 client might)
            b"POST /api/games HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            b"Content-Length: 100\r\n\r\n{\"level\"",  # a body shorter than announced
        ]
        socks = [socket.create_connection(srv.server_address[:2]) for _ in stalls]
        for sock, text in zip(socks, stalls):
            sock.sendall(text)
        for sock in socks:
            assert read_until_closed(sock, within=5) == b""
            sock.close()
        assert call(srv, "GET", "/api/info")[0] == 200


def trickle_headers(sock: socket.socket, every: float, stop: threading.Event) -> None:
    """A slow-header client: a request line, then a header line every `every` seconds, never the blank line
    that ends the headers, until the server closes the connection or `stop` is set."""
    with contextlib.suppress(OSError):
        sock.sendall(b"GET /api/info HTTP/1.1\r\nHost: localhost\r\n")
        while not stop.wait(every):
            sock.sendall(b"X-Slow: 1\r\n")


def closed_within(sock: socket.socket, within: float) -> bool:
    """Whether the server closes the connection within `within` seconds (sending nothing first)."""
    sock.settimeout(within)
    try:
        return sock.recv(4096) == b""
    except ConnectionResetError:  # closed while the client was still sending
        return True
    except TimeoutError:
        return False


def test_a_client_trickling_its_headers_is_cut_off_at_the_deadline(engine):
    # Each header line comes well inside the connection timeout: only the request's deadline ends them.
    limits = Limits(max_connections=2, connection_timeout=30.0, request_deadline=1.0)
    with serving(engine, limits) as srv:
        stop = threading.Event()
        socks = [socket.create_connection(srv.server_address[:2]) for _ in range(limits.max_connections)]
        threads = [threading.Thread(target=trickle_headers, args=(sock, 0.1, stop)) for sock in socks]
        for thread in threads:
            thread.start()
        try:
            assert all(closed_within(sock, within=20) for sock in socks)
            assert call(srv, "GET", "/api/info", timeout=20)[0] == 200  # their slots are free again
        finally:
            stop.set()
            for thread in threads:
                thread.join()
            for sock in socks:
                sock.close()


def test_a_request_within_its_deadline_is_served(engine):
    with serving(engine, Limits(request_deadline=5.0)) as srv:
        sock = socket.create_connection(srv.server_address[:2])
        for line in (b"GET /api/info HTTP/1.1\r\n", b"Host: localhost\r\n", b"Connection: close\r\n", b"\r\n"):
            sock.sendall(line)
            time.sleep(0.1)
        assert read_until_closed(sock, within=30).startswith(b"HTTP/1.0 200")
        sock.close()


def keep_trickling(address, every: float, stop: threading.Event) -> None:
    """A slow-header client that connects again each time the server cuts it off, until `stop` is set."""
    while not stop.is_set():
        with contextlib.suppress(OSError), socket.create_connection(address, timeout=30) as sock:
            trickle_headers(sock, every, stop)


def test_a_request_is_served_while_many_clients_trickle_their_headers(engine):
    # Before: 40 such clients held all 32 connections, and 9 in 12 requests got 503.
    limits = Limits(connection_timeout=30.0, request_deadline=1.0)
    with serving(engine, limits) as srv:
        stop = threading.Event()
        clients = [threading.Thread(target=keep_trickling, args=(srv.server_address[:2], 0.2, stop))
                   for _ in range(40)]
        for client in clients:
            client.start()
        try:
            time.sleep(0.5)  # all of them connected and trickling
            statuses = []
            for _ in range(12):
                statuses.append(call(srv, "GET", "/api/info", timeout=30)[0])
                time.sleep(0.1)
            assert statuses == [200] * 12
        finally:
            stop.set()
            for client in clients:
                client.join()


def test_connections_still_sending_hold_no_thread_and_the_oldest_makes_room(engine):
    limits = Limits(max_connections=8, connection_timeout=30.0, request_deadline=30.0)
    with serving(engine, limits) as srv:
        threads_before = threading.active_count()
        socks = [socket.create_connection(srv.server_address[:2]) for _ in range(limits.max_connections)]
        try:
            for sock in socks:
                sock.sendall(b"GET /api/info HTTP/1.1\r\n")
            time.sleep(0.2)
            assert threading.active_count() <= threads_before  # waiting costs a buffer, not a thread
            assert call(srv, "GET", "/api/info", timeout=30)[0] == 200  # pushes out the one waiting longest
            assert closed_within(socks[0], within=10)
            assert not any(closed_within(sock, within=0.2) for sock in socks[1:])
        finally:
            for sock in socks:
                sock.close()


def test_requests_being_answered_are_bounded(engine):
    gated = GatedEngine(engine)
    with serving(gated, Limits(max_answering=1)) as srv:
        gid = new_game(srv, color="white")["id"]
        answers = []
        mover = threading.Thread(target=lambda: answers.append(call(srv, "POST", f"/api/games/{gid}/engine", {})))
        mover.start()
        try:
            assert gated.searching.wait(30)
            status, answer = call(srv, "GET", "/api/info", timeout=30)
            assert status == 503 and "too many requests at once" in answer["error"]
        finally:
            gated.go_on.set()
            mover.join(60)
        assert answers[0][0] == 200
        # The answering thread frees its place just after the client has its answer: served again soon after.
        deadline = time.monotonic() + 30
        while call(srv, "GET", "/api/info")[0] != 200:
            assert time.monotonic() < deadline, "the server never served again after the answer"
            time.sleep(0.05)


def test_a_client_creating_many_games_cannot_evict_anothers_game(engine):
    with serving(engine) as srv:
        player = new_game(srv, client="127.0.0.2")
        statuses = [call(srv, "POST", "/api/games", {"level": "beginner"})[0] for _ in range(100)]
        assert statuses == [200] * Limits().max_games_per_client + [429] * (100 - Limits().max_games_per_client)
        assert call(srv, "GET", f"/api/games/{player['id']}", client="127.0.0.2") == (200, player)
        status, state = call(srv, "POST", f"/api/games/{player['id']}/move", {"path": [11, 15]},
                             client="127.0.0.2")
        assert status == 200 and state["moves"] == ["11-15"]


def test_a_full_server_makes_room_only_from_idle_games(engine):
    a, b, c = "127.0.0.1", "127.0.0.2", "127.0.0.3"  # three clients
    with serving(engine, Limits(max_games=3, max_games_per_client=2, game_idle_seconds=1.0)) as srv:
        def alive(*games: str) -> list[int]:
            return [call(srv, "GET", f"/api/games/{g}")[0] for g in games]

        a1, a2 = new_game(srv, client=a)["id"], new_game(srv, client=a)["id"]
        status, answer = call(srv, "POST", "/api/games", {}, client=a)
        assert status == 429 and "you have 2 games" in answer["error"]
        b1 = new_game(srv, client=b)["id"]
        status, answer = call(srv, "POST", "/api/games", {}, client=c)
        assert status == 503 and "3 games in play" in answer["error"]
        time.sleep(1.1)
        assert alive(a1) == [200]  # in use again; a2 and b1 stay idle
        new_game(srv, client=a)  # at its cap: replaces its own idle a2
        assert alive(a1, a2) == [200, 404]  # (b1 not asked for: that would use it)
        new_game(srv, client=c)  # the server is full: the idle b1 makes room
        assert alive(a1, b1) == [200, 404]
        assert call(srv, "POST", "/api/games", {}, client=c)[0] == 503  # nothing idle is left


def session_cookie(server) -> str:
    """The session cookie the page gives a browser that has none, as its Cookie header sends it back."""
    conn = http.client.HTTPConnection(*server.server_address[:2], timeout=30)
    conn.request("GET", "/")
    res = conn.getresponse()
    res.read()
    conn.close()
    return res.getheader("Set-Cookie").split(";")[0]


def test_a_burst_of_new_games_locks_no_new_browser_session_out(engine):
    # Before: 200 new games at once made 64, then every client, a browser opened afterwards too, got 429
    # for the next 30 minutes.
    with serving(engine) as srv, ThreadPoolExecutor(16) as pool:
        statuses = list(pool.map(lambda _: call(srv, "POST", "/api/games", {"level": "beginner"})[0], range(200)))
        assert statuses.count(200) == Limits().max_games_per_client and set(statuses) == {200, 429}
        browser = {"Content-Type": "application/json", "Cookie": session_cookie(srv)}
        status, state = call(srv, "POST", "/api/games", {"level": "beginner"}, headers=browser)
        assert status == 200
        status, state = call(srv, "POST", f"/api/games/{state['id']}/move", {"path": [11, 15]}, headers=browser)
        assert status == 200 and state["moves"] == ["11-15"]


def test_forged_sessions_from_one_address_lock_no_browser_out(engine):
    # Before: 300 made-up session cookies from one address, each with a new game and a malformed move (400),
    # filled all 256 slots, every game counted as played: a new browser anywhere got 503 for 30 minutes.
    # Here each forged game is even played (a legal move), so that only the address's cap can make room.
    def forge(_):
        headers = {"Content-Type": "application/json",
                   "Cookie": f"checkers_zero_session={secrets.token_hex(16)}"}
        status, state = call(srv, "POST", "/api/games", {"level": "beginner"}, headers=headers)
        if status != 200:
            return status
        assert call(srv, "POST", f"/api/games/{state['id']}/move", {"path": [99]}, headers=headers)[0] == 400
        assert call(srv, "POST", f"/api/games/{state['id']}/move", {"path": [11, 15]}, headers=headers)[0] == 200
        return status

    most = Limits().max_games_per_address
    with serving(engine) as srv, ThreadPoolExecutor(16) as pool:
        statuses = list(pool.map(forge, range(300)))
        assert statuses.count(200) == most and set(statuses) == {200, 429}
        status, answer = call(srv, "POST", "/api/games", {}, headers={
            "Content-Type": "application/json", "Cookie": f"checkers_zero_session={secrets.token_hex(16)}"})
        assert status == 429 and f"your address has {most} games" in answer["error"]
        browser = {"Content-Type": "application/json", "Cookie": session_cookie(srv)}
        status, state = call(srv, "POST", "/api/games", {"level": "beginner"}, headers=browser, client="127.0.0.2")
        assert status == 200, state
        status, state = call(srv, "POST", f"/api/games/{state['id']}/move", {"path": [11, 15]}, headers=browser,
                             client="127.0.0.2")
        assert status == 200 and state["moves"] == ["11-15"]


def test_the_address_cap_is_checked_as_every_limit_is(engine):
    with pytest.raises(ConfigError, match="max_games_per_address = 0: must be"):
        PlayServer(engine, port=0, limits=Limits(max_games_per_address=0))


@pytest.mark.parametrize("action,body,status", [
    ("move", {"path": [99]}, 400),  # malformed
    ("move", {"move": "11-20"}, 422),  # illegal
    ("engine", {}, 409),  # not possible now: the person's turn
    ("level", {"level": "grandmaster"}, 400),
])
def test_a_refused_request_does_not_count_as_play(engine, action, body, status):
    # Before: any request naming a game marked it played, refused or not, and so kept it for 30 minutes.
    limits = Limits(max_games=2, max_games_per_client=2, unplayed_game_seconds=0.5)
    with serving(engine, limits) as srv:
        played, refused = new_game(srv)["id"], new_game(srv)["id"]
        assert call(srv, "POST", f"/api/games/{played}/move", {"path": [11, 15]})[0] == 200
        assert call(srv, "POST", f"/api/games/{refused}/{action}", body)[0] == status
        time.sleep(0.6)
        new_game(srv)  # the game whose only request was refused is still never played: it makes room
        assert [call(srv, "GET", f"/api/games/{g}")[0] for g in (played, refused)] == [200, 404]


def test_games_never_played_make_room_after_a_short_while(engine):
    limits = Limits(max_games=4, max_games_per_client=4, unplayed_game_seconds=0.5)
    with serving(engine, limits) as srv:
        played = new_game(srv)["id"]
        assert call(srv, "POST", f"/api/games/{played}/move", {"path": [11, 15]})[0] == 200
        unplayed = [new_game(srv)["id"] for _ in range(3)]
        status, answer = call(srv, "POST", "/api/games", {})
        assert status == 429 and "one never played for 0.5 s" in answer["error"]
        time.sleep(0.6)
        new_game(srv)  # replaces the never-played game unused longest, not the played one unused longer
        assert [call(srv, "GET", f"/api/games/{g}")[0] for g in (played, *unplayed)] == [200, 404, 200, 200]


@pytest.mark.parametrize(("framing", "status", "message"), [
    (b"Transfer-Encoding: chunked\r\n", 411, "Content-Length"),
    (b"Transfer-Encoding: chunked\r\nContent-Length: 18\r\n", 411, "Content-Length"),
    (b"Content-Length: 18\r\nContent-Length: 18\r\n", 400, "one Content-Length"),
    (b"Content-Length: 18\r\nContent-Length: 0\r\n", 400, "one Content-Length"),
])
def test_a_body_framed_other_than_by_one_content_length_is_refused(engine, framing, status, message):
    # Before: a chunked body was read as empty and a game made from it; a second Content-Length was let be.
    body = b'{"color": "white"}'
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    with serving(engine) as srv:
        sock = socket.create_connection(srv.server_address[:2])
        sock.sendall(b"POST /api/games HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n" + framing
                     + b"\r\n" + (chunked if b"chunked" in framing else body))
        head, _, payload = read_until_closed(sock, within=30).partition(b"\r\n\r\n")
        sock.close()
        assert head.split(b" ")[1] == str(status).encode() and message in json.loads(payload)["error"]
        assert not srv.games


def reset(sock: socket.socket) -> None:
    """Close with a TCP reset, as a browser tab that goes away mid-request may."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def test_closed_connections_log_no_traceback(engine, capfd):
    gated = GatedEngine(engine)
    with serving(gated) as srv:
        address = srv.server_address[:2]
        sock = socket.create_connection(address)  # gone while its headers are read
        sock.sendall(b"GET /api/info HTTP/1.1\r\nHost: localhost\r\n")
        time.sleep(0.2)
        reset(sock)
        sock = socket.create_connection(address)  # gone before its error answer
        sock.sendall(b"GET /api/nothing HTTP/1.1\r\nHost: localhost\r\n\r\n")
        reset(sock)
        gid = new_game(srv, color="white")["id"]  # gone while the engine thinks
        sock = socket.create_connection(address)
        sock.sendall(b"POST /api/games/%s/engine HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json"
                     b"\r\nContent-Length: 0\r\n\r\n" % gid.encode())
        assert gated.searching.wait(30)
        reset(sock)
        gated.go_on.set()
        deadline = time.monotonic() + 30
        while len(call(srv, "GET", f"/api/games/{gid}")[1]["moves"]) != 1:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(0.3)
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Exception occurred" not in err, err


# ------------------------------------------------------------------ the analysis board (issue 86)

def wait_job(server, kind: str, job: dict, client: str = "127.0.0.1") -> dict:
    """Poll a job (as the page does) until it is finished."""
    deadline = time.monotonic() + 30
    while job["state"] in ("waiting", "running"):
        assert time.monotonic() < deadline, job
        time.sleep(0.05)
        status, job = call(server, "GET", f"/api/{kind}/{job['id']}", client=client)
        assert status == 200, job
    return job


def test_a_line_and_a_pdn_file_as_the_page_steps_through_them(server):
    status, line = call(server, "POST", "/api/line", {"moves": ["11-15", "23-19"]})
    assert status == 200 and line["moves"] == ["11-15", "23-19"] and len(line["fens"]) == 3
    assert len(line["legal_moves"]) == 3 and all(line["legal_moves"]) and line["outcome"] is None
    assert call(server, "POST", "/api/line", {"moves": ["11-15", "11-15"]})[0] == 422
    assert call(server, "POST", "/api/line", {"fen": "B:W99:B1"})[0] == 422
    assert call(server, "POST", "/api/line", {"moves": [11]})[0] == 400
    status, read = call(server, "POST", "/api/pdn", {"pdn": '[Black "A"]\n1. 11-15 23-19 *\n\n1. 11-18 *\n\n'
                                                            '[White "B"]\n1. 9-14 22-18 2. 5-9 *\n'})
    assert status == 200 and len(read["skipped"]) == 1
    assert [(g["index"], g["tags"], g["moves"]) for g in read["games"]] == [
        (1, {"Black": "A"}, ["11-15", "23-19"]), (3, {"White": "B"}, ["9-14", "22-18", "5-9"])]


def test_a_review_is_play_reviews_in_the_one_analysis_schema(server):
    status, job = call(server, "POST", "/api/reviews", {"pdn": "1. 11-15 23-19 2. 8-11 22-17 *", "sims": 4})
    assert status == 200 and job["kind"] == "review" and job["total"] == 5
    job = wait_job(server, "reviews", job)
    assert job["state"] == "done" and job["done"] == job["total"], job
    review = job["review"]
    assert [m["move"] for m in review["moves"]] == ["11-15", "23-19", "8-11", "22-17"]
    assert set(review["accuracy"]) == {"black", "white"} and len(review["scores"]) == 5
    for ply, answer in enumerate(review["positions"]):  # each position's answer is play.analysis_json's
        assert answer["ply"] == ply and {"fen", "side", "move", "wdl", "score", "proven", "simulations", "nodes",
                                         "seconds", "moves", "pv"} <= set(answer)
    # A start and moves instead of PDN text; refusals.
    status, job = call(server, "POST", "/api/reviews", {"fen": "B:W14,22,23:B1,2,3,9", "moves": ["9x18x27"], "sims": 2})
    assert status == 200 and wait_job(server, "reviews", job)["state"] == "done"
    assert call(server, "POST", "/api/reviews", {"pdn": "1. 11-15 *", "game": 2})[0] == 400
    assert call(server, "POST", "/api/reviews", {"pdn": "1. 11-15 *", "moves": []})[0] == 400
    assert call(server, "POST", "/api/reviews", {"pdn": "1. 11-15 *", "sims": MAX_SIMULATIONS + 1})[0] == 400
    assert call(server, "GET", "/api/reviews/nosuchjob")[0] == 404


def test_an_analysis_grows_to_its_simulations_and_a_new_one_replaces_the_clients_last(server):
    with server.engine_lock:  # the first analysis waits for the engine while the second is asked for
        status, first = call(server, "POST", "/api/analyses", {"moves": ["11-15"], "sims": MAX_SIMULATIONS})
        assert status == 200 and first["kind"] == "analysis"
        status, job = call(server, "POST", "/api/analyses", {"fen": "W:W18,24,27,28,30:B12,16,20,K22", "sims": 40,
                                                             "top": 2})
        assert status == 200
    job = wait_job(server, "analyses", job)
    answer = job["analysis"]
    assert job["state"] == "done" and answer["simulations"] >= 40 and len(answer["moves"]) <= 2
    assert {"wdl", "score", "nodes", "seconds", "pv"} <= set(answer)
    assert wait_job(server, "analyses", first)["state"] == "stopped"  # the client's new analysis stopped it
    assert call(server, "POST", "/api/analyses", {"fen": "B:W21:B"})[0] == 409  # Black has no move: over
    assert call(server, "POST", "/api/analyses", {"top": 0})[0] == 400


class SlowReviewEngine:
    """A stand-in for the review's analysis engine (play.api.Engine): one answer each time it is let go."""

    def __init__(self) -> None:
        from play.queries import EngineSettings

        self.settings = EngineSettings()
        self.go = threading.Semaphore(0)

    def answers(self, queries):
        for query in queries:
            for ply in query["analyze_plies"]:
                self.go.acquire(timeout=10)
                yield {"id": query["id"], "ply": ply, "move": "9-13", "side": "black", "score": 0.5, "proven": None,
                       "wdl": {"win": 0.3, "draw": 0.4, "loss": 0.3}}


def test_one_review_a_client_bounded_per_address_stoppable_and_stopped_when_nobody_asks(engine):
    limits = Limits(max_jobs_per_address=2, job_idle_seconds=0.5)
    with serving(engine, limits) as srv:
        slow = SlowReviewEngine()
        srv.board._make_analysis_engine = lambda: slow
        cookie = {"Content-Type": "application/json", "Cookie": f"checkers_zero_session={'a' * 32}"}
        pdn = {"pdn": "1. 11-15 23-19 2. 8-11 22-17 *"}

        def review(headers=cookie):
            return call(srv, "POST", "/api/reviews", pdn, headers=headers)

        status, job = review()
        assert status == 200
        slow.go.release()  # one position done: the progress shows it
        deadline = time.monotonic() + 10
        while call(srv, "GET", f"/api/reviews/{job['id']}")[1]["done"] < 1:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert review() == (409, {"error": "a review of yours is running: stop it or wait for it first"})
        other = {**cookie, "Cookie": f"checkers_zero_session={'b' * 32}"}
        assert review(other)[0] == 200  # another client: waits its turn for the engine
        status, answer = review({**cookie, "Cookie": f"checkers_zero_session={'c' * 32}"})
        assert status == 429 and "most one address" in answer["error"]
        assert call(srv, "POST", f"/api/reviews/{job['id']}/stop", {})[1]["id"] == job["id"]
        slow.go.release()
        job = wait_job(srv, "reviews", job)
        assert job["state"] == "stopped" and job["review"] is None
        # The second review, never asked about again, stops itself at its next position.
        (second,) = [j for j in srv.board.jobs.values() if j.id != job["id"]]
        time.sleep(limits.job_idle_seconds + 0.2)
        slow.go.release()
        deadline = time.monotonic() + 10
        while not second.finished:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert second.state == "stopped" and "nobody asked about it" in second.error


def test_the_jobs_kept_are_bounded_and_a_finished_one_makes_room(engine):
    with serving(engine, Limits(max_jobs=1)) as srv:
        slow = SlowReviewEngine()
        srv.board._make_analysis_engine = lambda: slow
        status, job = call(srv, "POST", "/api/reviews", {"pdn": "1. 11-15 *"})
        assert status == 200
        status, answer = call(srv, "POST", "/api/analyses", {"sims": 8}, client="127.0.0.2")
        assert status == 503 and "the most it runs at once" in answer["error"]
        call(srv, "POST", f"/api/reviews/{job['id']}/stop", {})
        slow.go.release()
        assert wait_job(srv, "reviews", job)["state"] == "stopped"
        status, job = call(srv, "POST", "/api/analyses", {"sims": 8}, client="127.0.0.2")
        assert status == 200
        assert call(srv, "GET", f"/api/reviews/{job['id']}")[0] == 404  # an analysis, not a review


def test_a_server_of_the_alpha_beta_engine_plays_by_depth_and_analyses_with_a_network(alphabeta_engine,
                                                                                     tiny_checkpoint):
    with serving(alphabeta_engine) as srv:
        srv.board.network = tiny_checkpoint  # the shipped network in use; a tiny one here
        info = call(srv, "GET", "/api/info")[1]
        assert info["searches"] == "depth" and [lv["depth"] for lv in info["levels"]] == [2, 6, 12, 18]
        state = new_game(srv, color="white", level="beginner")
        assert state["budget"] == "2 plies"
        status, state = call(srv, "POST", f"/api/games/{state['id']}/engine", {})
        assert status == 200 and state["thinking"]["depth"] == 2 and state["thinking"]["nodes"] > 0
        status, answer = call(srv, "POST", "/api/games", {"sims": 64})
        assert status == 400 and "this engine searches to a depth" in answer["error"]
        assert call(srv, "POST", "/api/games", {"depth": 99})[0] == 400
        assert new_game(srv, depth=4)["budget"] == "4 plies"
        # The board's analysis shows every move's visits: an MCTS engine of the network beside the player.
        status, job = call(srv, "POST", "/api/analyses", {"moves": ["11-15"], "sims": 24})
        assert status == 200
        answer = wait_job(srv, "analyses", job)["analysis"]
        assert answer["simulations"] >= 24 and answer["depth"] is None
