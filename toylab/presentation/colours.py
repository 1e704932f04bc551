"""How far apart two colours look: CIEDE2000 colour difference (Sharma, Wu and Dalal 2005) from sRGB hex codes.

The registry gives every estimator a colour; with over thirty base estimators some are bound to look alike. A chart
whose estimators include two alike colours (ΔE₀₀ below ALIKE) draws the later one's line dashed (``coincidence``), so
no two of its lines differ by a hard-to-see hue alone.
"""

import base64
import math

ALIKE = 10.0          # ΔE₀₀ below which two colours are hard to tell apart on a line (about 2 "just noticeable" steps
                      # is 2.3; lines 2.5 px wide, screen-shared, need several)
WHITE = (0.95047, 1.0, 1.08883)      # D65


def lab(colour):
    """CIE L*a*b* (D65) of an sRGB colour "#RRGGBB"."""
    linear = []
    for index in (1, 3, 5):
        value = int(colour[index:index + 2], 16) / 255
        linear.append(value / 12.92 if value <= 0.04045 else ((value + 0.055) / 1.055) ** 2.4)
    r, g, b = linear
    xyz = (0.4124 * r + 0.3576 * g + 0.1805 * b, 0.2126 * r + 0.7152 * g + 0.0722 * b,
           0.0193 * r + 0.1192 * g + 0.9505 * b)
    f = [t ** (1 / 3) if t > (6 / 29) ** 3 else t / (3 * (6 / 29) ** 2) + 4 / 29
         for t in (value / white for value, white in zip(xyz, WHITE, strict=True))]
    return 116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])


def difference(first, second):
    """ΔE₀₀ between two "#RRGGBB" colours."""
    return lab_difference(lab(first), lab(second))


def lab_difference(first, second):
    """ΔE₀₀ between two L*a*b* colours (CIEDE2000, kL = kC = kH = 1)."""
    (L1, a1, b1), (L2, a2, b2) = first, second
    mean_chroma = (math.hypot(a1, b1) + math.hypot(a2, b2)) / 2
    g = 0.5 * (1 - math.sqrt(mean_chroma**7 / (mean_chroma**7 + 25**7)))
    a1, a2 = (1 + g) * a1, (1 + g) * a2
    C1, C2 = math.hypot(a1, b1), math.hypot(a2, b2)
    h1, h2 = math.degrees(math.atan2(b1, a1)) % 360, math.degrees(math.atan2(b2, a2)) % 360
    dh = 0.0 if C1 * C2 == 0 else (h2 - h1 + 180) % 360 - 180
    dL, dC, dH = L2 - L1, C2 - C1, 2 * math.sqrt(C1 * C2) * math.sin(math.radians(dh / 2))
    L, C = (L1 + L2) / 2, (C1 + C2) / 2
    if C1 * C2 == 0:
        h = h1 + h2
    elif abs(h1 - h2) <= 180:
        h = (h1 + h2) / 2
    else:
        h = (h1 + h2 + 360) / 2 if h1 + h2 < 360 else (h1 + h2 - 360) / 2
    T = (1 - 0.17 * math.cos(math.radians(h - 30)) + 0.24 * math.cos(math.radians(2 * h))
         + 0.32 * math.cos(math.radians(3 * h + 6)) - 0.20 * math.cos(math.radians(4 * h - 63)))
    rotation = -math.sin(math.radians(60 * math.exp(-(((h - 275) / 25) ** 2)))) * 2 * math.sqrt(C**7 / (C**7 + 25**7))
    SL = 1 + 0.015 * (L - 50) ** 2 / math.sqrt(20 + (L - 50) ** 2)
    SC, SH = 1 + 0.045 * C, 1 + 0.015 * C * T
    return math.sqrt((dL / SL) ** 2 + (dC / SC) ** 2 + (dH / SH) ** 2 + rotation * (dC / SC) * (dH / SH))


def alike(colours):
    """{key: the earlier key whose colour it looks like (ΔE₀₀ < ALIKE)} for ``colours`` ({key: "#RRGGBB"}, in order)."""
    keys = list(colours)
    found = {}
    for index, key in enumerate(keys):
        for earlier in keys[:index]:
            if difference(colours[key], colours[earlier]) < ALIKE:
                found[key] = earlier
                break
    return found


def swatch(colour):
    """A small filled circle of ``colour`` as an SVG data URI, for a table's colour column."""
    svg = f'<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16"><circle cx="8" cy="8" r="7" ' \
          f'fill="{colour}"/></svg>'
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode()).decode()
