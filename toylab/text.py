"""How numbers and user input are written in text, the same on the page, in the CSV and on the command line.

A number that is undefined (the cosine of a zero mean gradient) is written UNDEFINED, never "nan", and
comes with the reason. User input inside a message is quoted and cut to its first 40 characters, so no
value can flood a notice or an error line; a name (an uploaded file's) is ``clipped``: its unprintable
characters escaped, cut in the middle to 40 characters so that its extension stays.
"""

UNDEFINED = "—"
QUOTE_LIMIT = 40
LONGEST_FIXED = 1e6                  # from here on a number is written in scientific notation


def quoted(value, limit=QUOTE_LIMIT):
    """repr of a string (other values: their repr), cut to ``limit`` characters: 'abc…' (10,000 characters)."""
    try:
        text = value if isinstance(value, str) else repr(value)
    except ValueError:                                   # an int too long to print (Python's 4,300-digit limit)
        return "an integer of over 4,300 digits"
    shown = text[:limit]
    shown = repr(shown) if isinstance(value, str) else shown
    return shown if len(text) <= limit else f"{shown}… ({len(text):,} characters)"


def formatted(value, style="{:.4f}"):
    """The number in ``style``, or in 4 significant digits (1.234e+20) once it reaches LONGEST_FIXED in size, so no
    number runs to dozens of digits; UNDEFINED for None and NaN; a number that rounds to zero without its sign
    (0.0000, not −0.0000)."""
    if value is None or value != value:
        return UNDEFINED
    text = f"{value:.4g}" if abs(value) >= LONGEST_FIXED else style.format(value)
    return text[1:] if text.startswith("-") and not text.strip("-0.") else text


def headline(value, decimals=4, digits=2):
    """A headline number to ``decimals`` places — or, when that would read 0.0000 for a number that is not 0, to
    ``digits`` significant digits (7.9e-07): a small KL is not no KL."""
    if value != 0 and abs(value) < 0.5 * 10**-decimals:
        return significant(value, digits)
    return f"{value:.{decimals}f}"


def listed(values, most=3):
    """'a', 'b', 'c' and 2 more: at most ``most`` values, each quoted."""
    values = list(values)
    shown = ", ".join(quoted(value) for value in values[:most])
    return shown + (f" and {len(values) - most} more" if len(values) > most else "")


def distinct(names):
    """The names, each repeated one numbered by its place: ("a.jsonl", "a.jsonl") → ("a.jsonl (1)", "a.jsonl (2)"),
    so that two files that share a name stay two columns, two lines, two keys."""
    names = list(names)
    return tuple(f"{name} ({index + 1})" if names.count(name) > 1 else name for index, name in enumerate(names))


def printable(text):
    """The text with each character that a terminal or a browser would act on rather than show written as repr
    writes it: controls (ESC starts a terminal's escape sequences: clear the screen, set the window's title),
    bidirectional overrides and isolates (U+202E turns the rest of the line around), zero-width and other format
    characters, separators other than the space; line breaks kept. Everything from a file or a link that reaches a
    terminal or the page passes here."""
    return "\n".join(line if line.isprintable() else _escaped(line) for line in str(text).split("\n"))


def _escaped(line):
    return "".join(character if character.isprintable() else repr(character)[1:-1] for character in line)


def clipped(text, limit=QUOTE_LIMIT):
    """The text with unprintable characters escaped (``printable``, line breaks too), at most ``limit`` characters,
    cut in the middle: 'a_very_long_name_of_a_r…_run.jsonl.gz' keeps the end, where a file's extension is."""
    shown = _escaped(str(text))
    if len(shown) <= limit:
        return shown
    tail = limit // 3
    return shown[:limit - tail - 1] + "…" + shown[-tail:]


def significant(value, digits=3):
    """``value`` to ``digits`` significant digits — 6.16e-05, 0.0123, 1.23e+04, never 0.0000 for a small number —
    or UNDEFINED for None and NaN."""
    if value is None or value != value:
        return UNDEFINED
    return f"{value:.{digits}g}"


def percent(share, digits=3):
    """A share as a percentage to ``digits`` significant digits: '0.0123 %', '12.5 %'."""
    return UNDEFINED if share is None or share != share else f"{100 * share:.{digits}g} %"
