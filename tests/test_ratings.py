import math
import random

import pytest

from train.arena.match import elo_from_score
from train.arena.ratings import ANCHOR, REFERENCE, PlayerInfo, RatingsTable, format_table, plot
from train.arena.sprt import PairSprt, SprtConfig, expected_score


def simulate(table, a, b, elo_diff, games, rng):
    p = expected_score(elo_diff)
    draw_rate = min(0.3, 2 * p, 2 * (1 - p))  # keeps the win rate among decisive games within [0, 1]
    w = d = l = 0
    for _ in range(games):
        if rng.random() < draw_rate:
            d += 1
        elif rng.random() < (p - draw_rate / 2) / (1 - draw_rate):
            w += 1
        else:
            l += 1
    table.add_results(a, b, w, d, l)


def test_fit_recovers_true_ratings_within_interval():
    rng = random.Random(1)
    true = {ANCHOR: 0.0, "ab2": 300.0, "ab4": 500.0, "ckpt-1": 400.0}
    table = RatingsTable()
    for name in true:
        table.add_player(PlayerInfo(name, "checkpoint" if name.startswith("ckpt") else "yardstick"))
    names = list(true)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            simulate(table, a, b, true[a] - true[b], 400, rng)
    fit = table.fit()
    assert fit[ANCHOR].elo == 0.0 and fit[ANCHOR].ci95 == 0.0
    for name, elo in true.items():
        if name == ANCHOR:
            continue
        assert abs(fit[name].elo - elo) < max(fit[name].ci95 * 1.5, 40), (name, fit[name], elo)
        assert 5 < fit[name].ci95 < 100


def test_intervals_against_the_reference_yardstick_ignore_the_anchors_uncertainty():
    """As in a real run: random loses every game, so the anchor is far and vague; the checkpoints and the
    alpha-beta yardsticks play many games, so their differences are sharp."""
    rng = random.Random(2)
    true = {"alphabeta:2": 700.0, REFERENCE: 820.0, "alphabeta:6": 980.0, "ckpt-1": 900.0, "ckpt-2": 1000.0}
    table = RatingsTable()
    table.add_player(PlayerInfo(ANCHOR, "yardstick"))
    for name in true:
        table.add_player(PlayerInfo(name, "checkpoint" if name.startswith("ckpt") else "yardstick"))
    table.add_results(ANCHOR, "alphabeta:2", 0, 0, 24)
    names = list(true)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            simulate(table, a, b, true[a] - true[b], 300, rng)
    fit = table.fit()
    assert fit[REFERENCE].ci95_ref == 0.0 and fit[ANCHOR].ci95 == 0.0
    assert fit[ANCHOR].ci95_ref > 200  # the anchor is far from everything else
    for name in ("ckpt-1", "ckpt-2", "alphabeta:6"):
        rating = fit[name]
        assert 10 < rating.ci95_ref < rating.ci95 / 4, rating
        measured = rating.elo - fit[REFERENCE].elo
        assert abs(measured - (true[name] - true[REFERENCE])) < 1.5 * rating.ci95_ref, (name, measured)
    assert f"vs {REFERENCE}" in format_table(table)


def test_perfect_scores_stay_finite_and_unconnected_players_are_marked():
    table = RatingsTable()
    for name in (ANCHOR, "ab6", "island"):
        table.add_player(PlayerInfo(name, "yardstick"))
    table.add_results("ab6", ANCHOR, 50, 0, 0)
    fit = table.fit()
    assert math.isfinite(fit["ab6"].elo) and fit["ab6"].elo > 400
    assert math.isnan(fit["island"].elo) and math.isinf(fit["island"].ci95)


def test_save_load_roundtrip_and_damage(tmp_path):
    table = RatingsTable()
    table.add_player(PlayerInfo(ANCHOR, "yardstick"))
    table.add_player(PlayerInfo("c1", "checkpoint", step=100, path="c1.pt"))
    table.add_results("c1", ANCHOR, 3, 2, 1)
    path = tmp_path / "ratings.json"
    table.save(path)
    again = RatingsTable.load(path)
    assert again.results == table.results and again.players["c1"].step == 100
    assert "c1" in format_table(again)
    assert plot(again, tmp_path / "r.png").stat().st_size > 1000
    path.write_text('{"players": ')
    with pytest.raises(ValueError, match="damaged"):
        RatingsTable.load(path)


def test_results_are_stored_symmetrically():
    table = RatingsTable()
    for n in ("a", "b"):
        table.add_player(PlayerInfo(n, "yardstick"))
    table.add_results("b", "a", 5, 1, 2)
    assert table.results == {"a|b": [2, 1, 5]}
    with pytest.raises(KeyError):
        table.add_results("a", "zzz", 1, 0, 0)


def run_sprt(pair_probs, seed, config=SprtConfig()):
    rng = random.Random(seed)
    test = PairSprt(config)
    while test.decision() is None:
        test.add_pair(rng.choices([0, 0.5, 1, 1.5, 2], pair_probs)[0])
    return test.decision(), len(test.pair_scores)


def test_sprt_promotes_clearly_stronger_and_rejects_equal():
    stronger = [0.02, 0.08, 0.4, 0.3, 0.2]  # mean pair score 1.29 -> ~+100 Elo
    equal = [0.05, 0.15, 0.6, 0.15, 0.05]
    assert sum(run_sprt(stronger, s)[0] == "promote" for s in range(20)) >= 18
    assert sum(run_sprt(equal, s)[0] == "reject" for s in range(20)) >= 17


def test_sprt_all_draws_rejects_and_cap_decides():
    test = PairSprt(SprtConfig(max_pairs=40))
    for _ in range(9):
        test.add_pair(1.0)
    assert test.decision() is None  # too few pairs to decide
    test.add_pair(1.0)
    assert test.decision() == "reject"
    capped = PairSprt(SprtConfig(max_pairs=4, elo1=400))
    for p in (2, 2, 1.5, 2):
        capped.add_pair(p)
    assert capped.decision() == "promote"
    with pytest.raises(ValueError):
        capped.add_pair(3)


def test_a_match_cut_short_of_the_pair_cap_is_decided_by_the_interval_rule():
    short = PairSprt(SprtConfig(max_pairs=40, min_pairs=20))
    for p in (2, 2, 1.5, 2):
        short.add_pair(p)
    assert short.decision() is None and short.final_decision() == "promote"  # lower end far above 0
    for p in (0, 2, 1, 1):
        short.add_pair(p)
    assert short.decision() is None and short.final_decision() == "reject"  # the interval now spans 0
    decided = PairSprt(SprtConfig(max_pairs=40))
    for _ in range(10):
        decided.add_pair(1.0)
    assert decided.final_decision() == decided.decision() == "reject"


def test_the_sprt_counts_pairs_in_ballot_order_not_in_the_order_they_finish():
    # With the whole ballot in flight the short games finish first: here the candidate wins every pair of
    # openings 10-39 before the first ten openings' games (all lost) are over.
    test = PairSprt(SprtConfig(max_pairs=40))
    for opening in range(10, 40):
        test.add_game(opening, 1.0)
        test.add_game(opening, 1.0)
    for opening in range(10):
        test.add_game(opening, 0.0)
    assert test.pair_scores == [] and test.decision() is None  # counted 30 winning pairs, it would promote
    for opening in range(9):
        test.add_game(opening, 0.0)
    assert test.pair_scores == [0.0] * 9 and test.decision() is None
    test.add_game(9, 0.0)  # the tenth pair frees the thirty behind it, in ballot order
    assert test.pair_scores == [0.0] * 10 + [2.0] * 30 and not test.waiting
    assert test.decision() == "promote"  # on every pair: 0.75


def test_elo_score_inverse():
    for elo in (-300, -50, 0, 50, 300):
        assert abs(elo_from_score(expected_score(elo)) - elo) < 1e-6


def test_the_classical_engine_tops_the_yardstick_ladder_in_the_table_and_plot(tmp_path):
    from train.arena.player_specs import make_player
    from train.arena.ratings import YARDSTICKS

    assert YARDSTICKS[-1].startswith("classical:") and YARDSTICKS[-2] == "alphabeta:12"
    top = make_player(YARDSTICKS[-1])
    assert top.name == YARDSTICKS[-1] and top.depth is not None  # fixed depth, as every yardstick is
    rng = random.Random(3)
    table = RatingsTable()
    for name in YARDSTICKS:
        table.add_player(PlayerInfo(name, "yardstick"))
    for weaker, stronger in zip(YARDSTICKS, YARDSTICKS[1:]):
        simulate(table, stronger, weaker, 200, 24, rng)
    fit = table.fit()
    assert fit[YARDSTICKS[-1]].elo > fit["alphabeta:12"].elo
    assert YARDSTICKS[-1] in format_table(table)
    assert plot(table, tmp_path / "ratings.png").stat().st_size > 0


def test_ratings_says_why_its_plot_has_no_checkpoint(tmp_path, capsys):
    # Before: an empty plot, with nothing said.
    from play.cli.main import main
    from zero.run.rundir import RunDir

    run = RunDir(tmp_path / "run")
    table = RatingsTable()
    table.add_player(PlayerInfo(ANCHOR, "yardstick"))
    table.add_player(PlayerInfo(REFERENCE, "yardstick"))
    table.add_results(REFERENCE, ANCHOR, 20, 2, 2)
    run.ratings.parent.mkdir(parents=True, exist_ok=True)
    table.save(run.ratings)
    assert main(["ratings", "--run", str(run.root)]) == 0
    said = capsys.readouterr().out.splitlines()[-1]
    assert said.startswith(f"plot written to {run.ratings_plot}: the yardsticks only, as no checkpoint of")
    table.add_player(PlayerInfo("c1", "checkpoint", step=100, path="c1.pt"))
    table.add_results("c1", ANCHOR, 3, 2, 1)
    table.save(run.ratings)
    assert main(["ratings", "--run", str(run.root)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"plot written to {run.ratings_plot}"
