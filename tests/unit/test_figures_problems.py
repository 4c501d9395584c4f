"""The multi-label and regression figures: ``per_label.png`` (F1 bars per label) and ``scatter.png``
(predicted vs gold), drawn from hand-made breakdowns, with their builders' sorting and rounding."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("matplotlib")
from PIL import Image  # noqa: E402  (matplotlib depends on pillow)

GOEMOTIONS = (
    "admiration amusement anger annoyance approval caring confusion curiosity desire disappointment "
    "disapproval disgust embarrassment excitement fear gratitude grief joy love nervousness optimism "
    "pride realization relief remorse sadness surprise neutral"
).split()


def _picture(path) -> tuple[int, int]:
    """The PNG's (width, height), after checking it decodes and is not one flat colour."""
    with Image.open(path) as image:
        image.load()
        pixels = np.asarray(image.convert("RGB"), dtype=np.int16)
        size = image.size
    assert pixels.std() > 10 and len(np.unique(pixels.reshape(-1, 3), axis=0)) > 20
    return size


def _draw(details, directory):
    from bertkit.reporting.figures import FIGURE_NAMES, draw_breakdown

    return draw_breakdown(details, directory / FIGURE_NAMES[details["kind"]], "dev data")


# --- builders ------------------------------------------------------------------------------------
def test_per_label_builder_sorts_by_f1_best_first_and_rounds():
    from bertkit.metrics.breakdowns import per_label

    scores = {
        "a": {"precision": 0.5, "recall": 0.1, "f1": 0.123456, "support": 7},
        "b": {"precision": 1.0, "recall": 0.8, "f1": 0.9, "support": 3.0},
        "c": {"precision": 0.9, "recall": 0.9, "f1": 0.9, "support": 12},
        "macro avg": {"precision": 0.6, "recall": 0.5, "f1": 0.5, "support": 22},
    }
    result = per_label(["a", "b", "c", "d"], scores)
    assert result == {
        "kind": "per_label",
        "labels": ["b", "c", "a", "d"],  # equal F1: label order kept
        "f1": [0.9, 0.9, 0.1235, 0.0],
        "support": [3, 12, 7, 0],
    }  # "d" missing: 0 / 0
    assert all(isinstance(n, int) for n in result["support"])
    json.dumps(result, allow_nan=False)


def test_scatter_builder_rounds_to_4_decimals_and_nulls_non_finite_values():
    from bertkit.metrics.breakdowns import scatter

    result = scatter(
        [1.234567, 2, np.float32(0.5)],
        np.array([1.99999, float("inf"), -0.000049]),
        {"pearson": 0.987654321, "spearman": float("nan"), "mse": 0.3},
    )
    assert result == {
        "kind": "scatter",
        "gold": [1.2346, 2.0, 0.5],
        "predicted": [2.0, None, -0.0],
        "pearson": 0.9877,
        "spearman": None,
    }
    json.dumps(result, allow_nan=False)  # strict JSON: bertkit.json keeps it
    with pytest.raises(ValueError, match="2 gold values but 1 predictions"):
        scatter([1.0, 2.0], [1.0], {})


# --- figures -------------------------------------------------------------------------------------
def test_per_label_figure_grows_taller_with_the_label_count(tmp_path):
    from bertkit.metrics.breakdowns import per_label

    rng = np.random.default_rng(0)
    many = per_label(
        GOEMOTIONS, {name: {"f1": float(rng.random()), "support": int(rng.integers(0, 900))} for name in GOEMOTIONS}
    )
    few = per_label(
        ["neg", "neu", "pos"],
        {"neg": {"f1": 0.7, "support": 30}, "neu": {"f1": 0.4, "support": 9}, "pos": {"f1": 0.8, "support": 41}},
    )
    (tmp_path / "many").mkdir()
    (tmp_path / "few").mkdir()
    tall, short = _draw(many, tmp_path / "many"), _draw(few, tmp_path / "few")
    assert tall.name == short.name == "per_label.png"
    (tall_width, tall_height), (short_width, short_height) = _picture(tall), _picture(short)
    assert short_width == tall_width >= 600 and short_height >= 250
    assert tall_height > 2.5 * short_height  # 28 bars with room for their names: ~0.3 inch each
    assert tall_height >= 28 * 30


def test_per_label_figure_draws_best_on_top_with_supports(tmp_path, monkeypatch):
    from bertkit.reporting import figures

    drawn = _capture(monkeypatch)
    details = {"kind": "per_label", "labels": ["x", "y", "z"], "f1": [0.2, 0.9, 0.5], "support": [4, 0, 11]}
    assert _picture(_draw(details, tmp_path))[1] >= 250
    axis = drawn[0].axes[0]
    top_first = sorted(axis.get_yticklabels(), key=lambda t: t.get_position()[1])  # y grows downwards
    assert [t.get_text() for t in top_first] == ["y", "z", "x"] and axis.yaxis_inverted()
    assert [t.get_text() for t in axis.texts] == ["0.90  (n=0)", "0.50  (n=11)", "0.20  (n=4)"]
    assert "3 labels" in axis.get_title()
    assert (
        figures.draw_breakdown(
            {"kind": "per_label", "labels": [], "f1": [], "support": []}, tmp_path / "none.png", "dev"
        )
        is None
    )


def test_scatter_figure_has_diagonal_labels_and_correlations(tmp_path, monkeypatch):
    from bertkit.metrics.breakdowns import scatter

    drawn = _capture(monkeypatch)
    rng = np.random.default_rng(1)
    gold = rng.uniform(0, 5, 300)
    path = _draw(scatter(gold, gold + rng.normal(0, 0.5, 300), {"pearson": 0.91234, "spearman": None}), tmp_path)
    assert path.name == "scatter.png"
    width, height = _picture(path)
    assert width >= 400 and height >= 400
    axis = drawn[0].axes[0]
    assert len(axis.collections[0].get_offsets()) == 300
    diagonal = axis.lines[0].get_xydata()
    assert (diagonal[:, 0] == diagonal[:, 1]).all()  # y = x
    assert axis.get_xlabel() == "gold value" and axis.get_ylabel() == "predicted value"
    title = axis.get_title()
    assert "n=300" in title and "Pearson r = 0.912" in title and "Spearman \u03c1 = n/a" in title
    assert "subsample" not in title


def test_scatter_figure_caps_drawn_points_with_a_fixed_subsample(tmp_path, monkeypatch):
    from bertkit.metrics.breakdowns import scatter
    from bertkit.reporting.figures import MAX_SCATTER_POINTS

    drawn = _capture(monkeypatch)
    rng = np.random.default_rng(2)
    gold = rng.normal(size=20_000)
    predicted = [float(v) for v in gold + rng.normal(0, 0.3, gold.size)]
    predicted[5] = None  # a non-finite prediction, stored as null: not drawn, not counted
    details = scatter(gold, [0.0] * gold.size, {"pearson": 0.95, "spearman": 0.94})
    details["predicted"] = predicted
    first = _draw(details, tmp_path)
    first_bytes = first.read_bytes()
    assert _draw(details, tmp_path).read_bytes() == first_bytes  # the same points on a redraw
    assert len(first_bytes) < 400_000 and max(_picture(first)) < 1000
    once, again = (f.axes[0].collections[0].get_offsets() for f in drawn)
    assert len(once) == MAX_SCATTER_POINTS == 5000 and np.array_equal(once, again)
    assert "5,000 of 19,999 points drawn" in drawn[0].axes[0].get_title()
    assert (
        _draw(
            {"kind": "scatter", "gold": [1.0], "predicted": [None], "pearson": None, "spearman": None},
            tmp_path / "empty",
        )
        is None
    )


def test_report_draws_both_kinds_into_the_model_directory(tmp_path):
    from bertkit.metrics.breakdowns import per_label, scatter
    from bertkit.reporting.build import build_report

    meta = {
        "task": {"task": "cls", "labels": ["a", "b"], "max_length": 32},
        "base_model": "tiny",
        "config": {"lr": 1e-3},
        "metrics": {"accuracy": 0.5},
        "history": [],
        "eval_details": per_label(["a", "b"], {"a": {"f1": 0.5, "support": 2}, "b": {"f1": 0.8, "support": 3}}),
    }
    (tmp_path / "bertkit.json").write_text(json.dumps(meta))
    report = {
        "data": "stsb dev",
        "metrics": {"pearson": 0.8},
        "details": scatter([1.0, 2.0, 3.0], [1.1, 2.2, 2.7], {"pearson": 0.8, "spearman": 0.7}),
    }
    (tmp_path / "eval-stsb.json").write_text(json.dumps(report))
    result = build_report(tmp_path, meta)
    assert sorted(p.name for p in (tmp_path / "figures").iterdir()) == ["eval-stsb.scatter.png", "per_label.png"]
    assert len(result["figures"]) == 2 and all(_picture(p) for p in result["figures"])


def _capture(monkeypatch) -> list:
    """Keeps each figure the module saves, to read its axes after drawing."""
    from bertkit.reporting import figures

    kept, save = [], figures.save_figure

    def keep(plt, figure, target):
        kept.append(figure)
        return save(plt, figure, target)

    monkeypatch.setattr(figures, "save_figure", keep)
    return kept
