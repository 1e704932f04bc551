"""Where a chart's text labels go so that no two of them overprint and none covers a marker.

Each label is tried beside its anchor — right, left, above, below, then one and more rows further up and down —
and takes the first place where its box overlaps no label placed before it and no marker; failing that, the
first place inside the plot that overlaps nothing, however far (a leader rule then joins it to its anchor).
Boxes are worked out in pixels for the narrowest plot the page draws (``width``) and the chart's fixed height,
with a text width estimated on the generous side (``CHARACTER_WIDTH`` per character). On a wider plot every
horizontal distance grows while the boxes keep their size, so what was clear at ``width`` stays clear.

Positions come back in data units (the plot's x and y domains, both linear), for a text mark aligned left and
centred vertically on them.
"""

import itertools
from dataclasses import dataclass

CHARACTER_WIDTH = 0.62       # × font size: wider than any character of the page's sans-serif but "W" and "M"
LINE_HEIGHT = 1.3            # × font size
GAP = 6                      # pixels between a marker's edge and its label
FARTHEST_ROWS = 6            # rows above and below the anchor tried before any free place


@dataclass(frozen=True)
class Box:
    left: float
    top: float
    right: float
    bottom: float

    def overlaps(self, other):
        return self.left < other.right and other.left < self.right and self.top < other.bottom and other.top < self.bottom

    def inside(self, width, height):
        return self.left >= 0 and self.top >= 0 and self.right <= width and self.bottom <= height


@dataclass(frozen=True)
class Placed:
    x: float             # the label's left edge, data units
    y: float             # its vertical centre, data units
    leader: bool         # far from its anchor: join them with a rule


def text_size(text, font_size):
    """(width, height) in pixels that the text's box is given."""
    return len(text) * CHARACTER_WIDTH * font_size, LINE_HEIGHT * font_size


def place(anchors, texts, x_domain, y_domain, width, height, font_size, radii):
    """A Placed per label: ``anchors`` are (x, y) in data units (the point each label names), ``texts`` the labels;
    every anchor is also a marker, ``radii`` pixels round it, that no label may cover."""
    def to_pixels(x, y):
        return ((x - x_domain[0]) / (x_domain[1] - x_domain[0]) * width,
                (y_domain[1] - y) / (y_domain[1] - y_domain[0]) * height)

    def to_data(left, middle):
        return (x_domain[0] + left / width * (x_domain[1] - x_domain[0]),
                y_domain[1] - middle / height * (y_domain[1] - y_domain[0]))

    points = [to_pixels(x, y) for x, y in anchors]
    taken = [Box(px - radius, py - radius, px + radius, py + radius) for (px, py), radius in zip(points, radii, strict=True)]
    placed = []
    for (px, py), text, radius in zip(points, texts, radii, strict=True):
        box_width, box_height = text_size(text, font_size)
        reach = radius + GAP
        beside = [(px + reach, py), (px - reach - box_width, py), (px - box_width / 2, py - reach - box_height / 2),
                  (px - box_width / 2, py + reach + box_height / 2)]
        rows = ((left, py + sign * row * (box_height + GAP / 2)) for row in range(1, FARTHEST_ROWS + 1)
                for sign in (-1, 1) for left in (px + reach, px - reach - box_width))
        anywhere = ((left, middle) for middle in _steps(box_height / 2, height - box_height / 2, box_height / 2)
                    for left in _steps(0, width - box_width, box_width / 4))
        candidates = enumerate(itertools.chain(beside, rows, anywhere))
        for tried, (left, middle) in candidates:  # noqa: B007 (after the loop: the place taken)
            box = Box(left, middle - box_height / 2, left + box_width, middle + box_height / 2)
            if box.inside(width, height) and not any(box.overlaps(other) for other in taken):
                break                    # else, no free place at all (more labels than the plot holds): the last one
        taken.append(box)
        placed.append(Placed(*to_data(left, middle), leader=tried >= len(beside)))
    return placed


def _steps(start, stop, step):
    """start, start + step, … up to stop (at least start)."""
    count = max(int((stop - start) // step), 0) + 1
    return [start + i * step for i in range(count)]
