"""The play server's JSON API: games, moves, engine replies, undo, and refusals that leave the game as it was."""

from __future__ import annotations

import http.client
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from play.cli import build_parser
from zero.pdn import PdnGame, read_pdn_text
from play.server import DEFAULT_HOST, PlayServer, start_in_thread


@pytest.fixture(scope="module")
def server(engine):
    srv, stop = start_in_thread(engine)
    yield srv
    stop()


def call(server, method: str, path: str, body=None, raw: bytes | None = None,
         headers: dict[str, str] | None = None) -> tuple[int, dict | str]:
    host, port = server.server_address[:2]
    conn = http.client.HTTPConnection(host, port, timeout=60)
    payload = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    conn.request(method, path, body=payload, headers=headers or {"Content-Type": "application/json"})
    res = conn.getresponse()
    data = res.read().decode()
    conn.close()
    if res.getheader("Content-Type", "").startswith("application/json"):
        return res.status, json.loads(data)
    return res.status, data


def new_game(server, **fields) -> dict:
    status, state = call(server, "POST", "/api/games", fields or {"level": "beginner"})
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
     ({"level": "club", "sims": 5}, "either level or sims"), ({"colour": "black"}, "unknown field")],
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
    assert call(server, "GET", f"/api/games/{gid}", headers={"Host": "localhost:1234"}) == (200, state)
