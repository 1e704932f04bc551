"""Placed labels never overprint one another nor cover a marker, inside the plot, at the narrowest width and at any
wider one (hypothesis, derandomized: the same examples on every run)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from toylab.presentation.labels import Box, place, text_size

PROPERTY = settings(derandomize=True, database=None, deadline=None, max_examples=200)
WIDTH, HEIGHT, FONT, RADIUS = 360, 400, 16, 9

points = st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1), st.text("abcdefghij_= ", min_size=2, max_size=18)),
                  min_size=1, max_size=9)


def boxes(anchors, texts, placed, width, rounding=1e-9):
    """Each label's box (less ``rounding``: boxes that touch do not overprint) and each marker's square, in pixels,
    on a plot ``width`` wide over the unit square."""
    labels = []
    for text, label in zip(texts, placed, strict=True):
        box_width, box_height = text_size(text, FONT)
        left, middle = label.x * width + rounding, (1 - label.y) * HEIGHT
        labels.append(Box(left, middle - box_height / 2 + rounding, left + box_width - 2 * rounding,
                          middle + box_height / 2 - rounding))
    markers = [Box(x * width - RADIUS, (1 - y) * HEIGHT - RADIUS, x * width + RADIUS, (1 - y) * HEIGHT + RADIUS)
               for x, y in anchors]
    return labels, markers


@PROPERTY
@given(points, st.floats(1.0, 4.0))
def test_labels_never_overprint_at_the_narrowest_width_or_any_wider(rows, stretch):
    anchors = [(x, y) for x, y, _ in rows]
    texts = [text for _, _, text in rows]
    placed = place(anchors, texts, (0.0, 1.0), (0.0, 1.0), WIDTH, HEIGHT, FONT, [RADIUS] * len(rows))
    for width in (WIDTH, WIDTH * stretch):
        labels, markers = boxes(anchors, texts, placed, width)
        for index, label in enumerate(labels):
            assert label.inside(width, HEIGHT)
            assert not any(label.overlaps(other) for other in labels[:index])
            assert not any(label.overlaps(marker) for marker in markers)


def test_a_lone_label_sits_right_of_its_point_and_needs_no_leader():
    (label,) = place([(0.2, 0.5)], ["naive"], (0.0, 1.0), (0.0, 1.0), WIDTH, HEIGHT, FONT, [RADIUS])
    assert 0.2 < label.x < 0.2 + 30 / WIDTH and label.y == 0.5 and not label.leader


def test_two_labels_at_one_point_are_stacked_not_overprinted():
    first, second = place([(0.5, 0.5), (0.5, 0.5)], ["naive", "geo_rs"], (0.0, 1.0), (0.0, 1.0), WIDTH, HEIGHT,
                          FONT, [RADIUS] * 2)
    assert (first.x, first.y) != (second.x, second.y)
