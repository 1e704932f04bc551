"""What the user chose and how a link writes it: the one place the page and the command line share ranges.

    settings       the frozen, hashable Settings every view and cache reads
    query          a (hand-edited) URL query parsed into Settings and view values, and back
"""
