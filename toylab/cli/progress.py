"""A progress bar with an estimated time left, on stderr: for a command line run that takes a while.

    bar = ProgressBar("training", total=K + 1)
    for k in range(K + 1):
        …
        bar.update(k + 1)          # redrawn at most every REDRAW_S seconds
    bar.close()                    # ends the line

The time left is the elapsed time per unit so far times the units left; ``update(done, text)`` draws ``text``
instead of the counts and the time (a run's reading says its own: ``your_run.run_progress``).
"""

import sys
import time

REDRAW_S = 0.5
WIDTH = 30


class ProgressBar:
    def __init__(self, label, total, stream=None):
        self.label, self.total, self.stream = label, max(1, total), stream or sys.stderr
        self.start = self.drawn = time.monotonic()
        self.done, self.text = 0, None

    def update(self, done, text=None):
        self.done, self.text = done, text
        now = time.monotonic()
        if now - self.drawn >= REDRAW_S or done >= self.total:
            self.drawn = now
            self._draw(now)

    def close(self):
        self._draw(time.monotonic())
        self.stream.write("\n")
        self.stream.flush()

    def _draw(self, now):
        share = min(1.0, self.done / self.total)
        filled = round(share * WIDTH)
        elapsed = now - self.start
        left = elapsed * (1 - share) / share if share > 0 else float("inf")
        eta = "?" if left == float("inf") else f"{left:,.0f} s"
        counts = self.text or f"{self.done:,}/{self.total:,}  {elapsed:,.0f} s, about {eta} left"
        self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (WIDTH - filled)}] {share:4.0%}  {counts}\033[K")
        self.stream.flush()
