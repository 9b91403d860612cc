"""End to end: the play page in a real headless Chromium (Debian's package, driven by playwright).

Skips when Chromium or playwright is missing, except under CI (CI=true), where .ci/run installs both and a
missing one is a failure: the browser tests must really run there.
"""

from __future__ import annotations

import os
import shutil
from contextlib import contextmanager

import pytest

from play.server import start_in_thread
from zero.corpus.pdn import read_pdn
from zero.rules.notation import fen_to_position

try:
    from playwright import sync_api
except ImportError:  # the dev extra installs it
    sync_api = None

CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


def _need(found, what: str):
    if not found:
        if os.environ.get("CI"):
            pytest.fail(f"{what} not found: CI must install it (see .ci/run)")
        pytest.skip(f"{what} not found: install it to run the browser tests (see .ci/run)")
    return found


@pytest.fixture(scope="module")
def browser():
    chromium = _need(shutil.which("chromium"), "Debian's chromium (apt-get install chromium)")
    _need(sync_api, "playwright (pip install -e '.[dev]')")
    with sync_api.sync_playwright() as pw:
        launched = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
        yield launched
        launched.close()


@contextmanager
def page_of(browser, engine):
    """The play page of a server of `engine`, open in the browser, its first game begun."""
    server, stop = start_in_thread(engine)
    try:
        context = browser.new_context(viewport={"width": 1100, "height": 800})
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(server.url)
        page.errors = errors
        wait_for_your_turn(page, 0)  # the page starts a game by itself
        yield page
        context.close()
    finally:
        stop()


@pytest.fixture(scope="module")
def page(browser, engine):
    with page_of(browser, engine) as opened:
        yield opened


def square(page, sq: int):
    return page.locator(f'#board [data-square="{sq}"]')


def classes(page, sq: int) -> set[str]:
    return set((square(page, sq).get_attribute("class") or "").split())


def wait_for_your_turn(page, moves: int | None = None) -> None:
    """Until the page holds a game where it is the person's turn (after `moves` moves, when given)."""
    page.wait_for_function("(n) => game && !busy && game.human_to_move && (n === null || game.moves.length === n)",
                           arg=moves, timeout=60_000)


def new_game(page, fen: str = "") -> None:
    if not page.locator("#fen-box").evaluate("box => box.open"):
        page.click("#fen-box summary")
    page.fill("#fen", fen)
    page.click("#new-game")
    page.wait_for_function("(fen) => game && game.moves.length === 0 && (fen === '' || game.fen === fen)", arg=fen)
    wait_for_your_turn(page, 0)


def test_multi_jump_by_clicking_through_the_path_engine_reply_and_undo(multi_jump_fen, page):
    new_game(page, multi_jump_fen)
    assert square(page, 9).locator("[data-piece=b]").count() == 1
    square(page, 9).click()
    assert "selected" in classes(page, 9)
    assert "step" in classes(page, 18)  # both captures go through 18 ...
    assert {"target"} <= classes(page, 25) and {"target"} <= classes(page, 27)  # ... and end on 25 or 27
    square(page, 18).click()
    assert "route" in classes(page, 18) and "target" in classes(page, 27)
    square(page, 27).click()
    wait_for_your_turn(page, 2)  # the engine has replied
    record = page.input_value("#pdn")
    assert "1. 9x18x27 " in record
    assert page.locator("#thinking table tbody tr").count() >= 1  # the engine's thinking is shown
    assert "win" in page.text_content("#thinking") or "%" in page.text_content("#thinking")
    assert square(page, 27).locator("[data-piece]").count() == 1
    page.click("#undo")
    wait_for_your_turn(page, 0)
    assert "9x18x27" not in page.input_value("#pdn")
    assert square(page, 9).locator("[data-piece=b]").count() == 1  # back where it started
    assert square(page, 14).locator("[data-piece=w]").count() == 1  # the captured pieces are back
    assert page.errors == []


def test_routes_with_the_same_ends_are_told_apart_by_clicking_through(king_routes_fen, page):
    new_game(page, king_routes_fen)
    square(page, 3).click()
    assert "step" in classes(page, 10) and "step" in classes(page, 12) and "target" in classes(page, 17)
    square(page, 3).click()  # the selected piece again: deselects (the round trip 3x10x19x12x3 is not played)
    assert "selected" not in classes(page, 3) and page.evaluate("game.moves.length") == 0
    square(page, 3).click()
    square(page, 17).click()  # two routes end on 17
    assert "Several routes end there" in page.text_content("#message")
    assert page.evaluate("game.moves.length") == 0
    for sq in (12, 19, 10, 17):
        square(page, sq).click()
    wait_for_your_turn(page, 2)
    assert "1. 3x12x19x10x17 " in page.input_value("#pdn")
    assert page.errors == []


def test_a_simple_move_from_the_start_and_flip(page):
    new_game(page)
    square(page, 11).click()
    assert "target" in classes(page, 15) and "target" in classes(page, 16)
    square(page, 15).click()
    wait_for_your_turn(page, 2)
    assert "1. 11-15 " in page.input_value("#pdn")
    assert page.text_content("#last-move").startswith("Last move: ")
    below = square(page, 1).bounding_box()["y"] > square(page, 32).bounding_box()["y"]
    assert below  # you play Black: Black's side (square 1) at the bottom
    page.click("#flip")
    assert square(page, 1).bounding_box()["y"] < square(page, 32).bounding_box()["y"]
    page.click("#flip")
    with page.expect_download() as info:
        page.click("#download-pdn button")
    download = info.value
    assert download.suggested_filename.endswith(".pdn")
    (game,) = list(read_pdn(download.path()))
    assert [str(m) for m in game.moves] == page.evaluate("game.moves")
    page.click("#copy-pdn")
    page.wait_for_function("document.querySelector('#copy-note').textContent === 'Copied.'")
    assert page.errors == []


def test_an_illegal_click_changes_nothing_and_hint_highlights_a_move(page):
    new_game(page)
    square(page, 1).click()  # a piece with no move
    assert "selected" not in classes(page, 1)
    assert "cannot move" in page.text_content("#message")
    page.click("#hint")
    page.wait_for_function("document.querySelector('#thinking-title').textContent.startsWith('Hint')")
    assert page.locator("#board .hinted").count() == 2
    assert page.evaluate("game.moves.length") == 0  # the hint played nothing


def contrast(color: str, background: str) -> float:
    """The WCAG contrast ratio of two computed CSS colours ('rgb(r, g, b)')."""
    def luminance(css: str) -> float:
        channels = [int(c) / 255 for c in css[css.index("(") + 1:css.index(")")].split(",")[:3]]
        r, g, b = (c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    light, dark = sorted((luminance(color), luminance(background)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def test_the_new_game_label_stays_readable_under_the_pointer(page):
    # Before: the hover background of every button was near-white, under the primary button's white label.
    page.hover("#new-game")
    color, background = page.eval_on_selector(
        "#new-game", "b => [getComputedStyle(b).color, getComputedStyle(b).backgroundColor]")
    assert contrast(color, background) >= 4.5, (color, background)
    page.mouse.move(0, 0)


def test_resign_asks_first(page):
    # Before: one click on Resign ended the game, with no way back but Undo.
    new_game(page)
    asked = []
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
    page.click("#resign")
    page.wait_for_load_state("networkidle")
    assert asked == ["Resign this game?"] and not page.evaluate("game.over")
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#resign")
    page.wait_for_function("game.over")
    assert page.errors == []


# ------------------------------------------------------------------ the analysis board (issue 86)

def board_pieces(page) -> dict[int, str]:
    """The pieces the board shows, square -> b, w, B or W."""
    return {int(sq): piece for sq, piece in page.eval_on_selector_all(
        "#board [data-square]", "cells => cells.filter(c => c.querySelector('[data-piece]'))"
        ".map(c => [c.dataset.square, c.querySelector('[data-piece]').dataset.piece])")}


def fen_pieces(fen: str) -> dict[int, str]:
    position = fen_to_position(fen)
    return {sq: position.piece_at(sq) for sq in range(1, 33) if position.piece_at(sq)}


def play_first_legal(page, moves_after: int) -> None:
    path = page.evaluate("game.legal_moves[0].path")
    for sq in path:
        square(page, sq).click()
    wait_for_your_turn(page, moves_after)


def test_review_in_the_page_draws_the_graph_and_marks_and_clicks_show_the_position(page):
    new_game(page)
    page.select_option("#level", "beginner")  # the review searches each position at the level's simulations
    page.wait_for_function("game.level === 'beginner'")
    for moves_after in (2, 4, 6):
        play_first_legal(page, moves_after)
    page.click("#review")
    page.wait_for_function("review !== null && reviewJob === null", timeout=30_000)
    review = page.evaluate("review")
    fens = page.evaluate("game.fens")
    assert len(review["moves"]) == 6 and review["fen"] == fens[0]
    # One point a ply, at the review's value: Black's expected score, from each answer's side-to-move score.
    points = page.eval_on_selector_all("#graph circle.pt", "cs => cs.map(c => [+c.dataset.ply, +c.dataset.score])")
    assert [ply for ply, _ in points] == list(range(7))
    for ply, score in points:
        answer = review["positions"][ply]
        assert score == pytest.approx(review["scores"][ply])
        assert answer["ply"] == ply and answer["fen"] == fens[ply]  # play.analysis_json's answers
        assert score == pytest.approx(answer["score"] if answer["side"] == "black" else 1 - answer["score"], abs=1e-3)
    marks = [m["mark"] for m in review["moves"]]
    assert page.locator("#move-list .mv.mistake").count() == marks.count("?")
    assert page.locator("#move-list .mv.blunder").count() == marks.count("??")
    assert page.locator("#graph circle.pt.mistake, #graph circle.pt.blunder").count() == sum(map(bool, marks))
    assert "accuracy" in page.text_content("#accuracy-black")
    # A point clicked shows its position; the move list follows.
    page.click('#graph circle[data-ply="2"]')
    assert board_pieces(page) == fen_pieces(fens[2])
    assert page.get_attribute("#move-list .mv.current", "data-ply") == "2"
    assert review["moves"][1]["move"] in page.text_content("#review-move")
    # A move clicked in the list shows its position; the graph follows.
    page.click('#move-list .mv[data-ply="5"]')
    assert board_pieces(page) == fen_pieces(fens[5])
    cursor_x = float(page.get_attribute("#graph line.at", "x1"))
    assert cursor_x == pytest.approx(float(page.get_attribute('#graph circle[data-ply="5"]', "cx")), abs=0.1)
    page.click("#last")  # back to the game: the person may move again
    assert board_pieces(page) == fen_pieces(fens[6]) and page.evaluate("cursor") is None
    assert page.errors == []


def test_a_pasted_fen_gets_the_engines_lines_and_a_move_played_from_there(page):
    fen = "W:W18,24,27,28,30:B12,16,20,K22"
    page.fill("#study-fen", fen)
    page.click("#load-fen")
    page.wait_for_function("(fen) => study && study.line.fen === fen", arg=fen)
    assert board_pieces(page) == fen_pieces(fen)
    page.select_option("#analysis-sims", "64")
    page.click("#analyse")
    page.wait_for_function("analysis && analysis.state === 'done' && analysis.analysis", timeout=30_000)
    answer = page.evaluate("analysis.analysis")
    assert answer["fen"] == fen and answer["simulations"] >= 64
    rows = page.locator("#lines tbody tr")
    assert rows.count() == len(answer["moves"]) >= 1
    assert rows.first.locator("td").first.text_content() == answer["moves"][0]["move"]
    assert f"{answer['simulations']} simulations" in page.text_content("#effort-text")
    # Play the engine's best move on the analysis board: the analysis follows to the new position.
    for sq in answer["moves"][0]["path"]:
        square(page, sq).click()
    page.wait_for_function("study.line.moves.length === 1")
    after = page.evaluate("study.line.fens[1]")
    page.wait_for_function("(fen) => analysis && analysis.analysis && analysis.analysis.fen === fen", arg=after,
                           timeout=30_000)
    page.click("#analyse")  # stop
    page.wait_for_function("!analysing")
    assert page.text_content("#analyse") == "Analyse"
    # A position set up on the board: a click cycles a square through the pieces.
    page.click("#setup")
    for _ in range(2):
        square(page, 1).click()  # empty, black man, black king
    page.select_option("#setup-side", "W")
    page.click("#setup-done")
    page.wait_for_function("study && study.line.moves.length === 0 && !setup")
    assert fen_pieces(page.evaluate("study.line.fen")) == {**fen_pieces(after), 1: "B"}
    assert page.evaluate("study.line.fen").startswith("W:")
    page.click("#back-to-game")
    assert page.evaluate("study") is None
    assert page.errors == []


def test_the_default_players_page_shows_its_depth_and_nodes(browser, alphabeta_engine):
    with page_of(browser, alphabeta_engine) as page:
        assert "beginner (2 plies)" in page.text_content("#level")
        square(page, 11).click()
        square(page, 15).click()
        wait_for_your_turn(page, 2)  # the engine has replied
        effort = page.text_content("#thinking-effort")
        assert effort.startswith("depth 6 · ") and "nodes" in effort  # the default level, club: 6 plies
        assert page.locator("#thinking table thead th").all_text_contents() == ["Move", "W / D / L"]
        assert page.locator("#thinking .pv").count() == 1
        assert page.errors == []
