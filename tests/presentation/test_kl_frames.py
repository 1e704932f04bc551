"""The KL view's frame and sentence arrange the library's rows: nothing recomputed, undefined numbers missing."""

import math

from toylab import make_toy
from toylab.analysis.kl_view import kl_table
from toylab.engine.reference import Reference
from toylab.presentation import kl_frames
from toylab.text import UNDEFINED


def test_the_frame_is_the_rows():
    rows = kl_table(make_toy(mismatch=0.7), reference=Reference(1.0), N=32)
    frame = kl_frames.kl_view_frame(rows)
    assert list(frame["setting"]) == [row["setting"] for row in rows]
    for column in ("rel_bias", "rel_std", "rel_rmse", "on_policy_rel_bias"):
        assert list(frame[column]) == [row[column] for row in rows]
    assert list(frame["cosine"]) == [f"{row['cosine']:+.4f}" for row in rows]


def test_an_undefined_number_is_missing_at_the_reference_itself():
    rows = kl_table(make_toy(), reference=Reference(0.0))          # π = π_ref: ∇KL = 0, nothing is defined
    frame = kl_frames.kl_view_frame(rows)
    assert set(frame["cosine"]) == {UNDEFINED} and all(math.isnan(value) for value in frame["rel_bias"])
    assert kl_frames.engine_sentence(rows) is None


def test_the_sentence_names_what_the_engine_breaks_and_what_it_keeps():
    rows = kl_table(make_toy(mismatch=0.7), reference=Reference(1.0))
    broken, kept = kl_frames.broken_by_the_engine(rows)
    by_setting = {row["setting"]: row for row in rows}
    assert {setting for setting, _ in broken} == {"k2.loss", "k3.loss.current", "k3+.loss", "k1.reward",
                                                  "k1.reward.to_go", "k1.reward.token"}
    assert set(kept) == {"k3.loss.engine", "k1.loss.engine", "full.loss", "k1.reward.tok_is", "k1.reward.seq_is"}
    assert all(bias == by_setting[setting]["rel_bias"] for setting, bias in broken)
    sentence = kl_frames.engine_sentence(rows)
    assert "k2.loss (rel bias" in sentence and "k3.loss.engine" in sentence and "k3.loss," not in sentence


def test_the_chart_draws_each_defined_point_and_a_lessons_marks():
    from toylab.lessons.lesson import Mark
    from toylab.presentation import frames, kl_charts

    rows = kl_table(make_toy(mismatch=0.7), reference=Reference(1.0), N=32)
    points = kl_frames.kl_scatter_frame(rows)
    assert list(points["setting"]) == [row["setting"] for row in rows]
    k3 = points.set_index("setting").loc["k3.loss"]
    marks = frames.mark_frame([Mark("kl_bias_std", "k3", float(k3["rel_bias"]), float(k3["rel_std"]))])
    spec = kl_charts.kl_bias_std_chart(points, 32, marks).to_dict()
    names = [layer.get("name") for layer in spec["layer"]]
    assert "lesson_mark_ring" in names and "lesson_mark_number" in names
    undefined = kl_frames.kl_scatter_frame(kl_table(make_toy(), reference=Reference(0.0)))
    assert len(undefined) == 0
