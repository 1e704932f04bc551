"""How far a run's reading has come: steps read of the run's, response tokens per second, the time left.

    progress = RunProgress(steps=50)
    progress.add(tokens)           # a step read (its response tokens)
    progress.share(), progress.text()   # 0.24, "12 of 50 steps, 24.1 M tokens, 2.30 M tokens/s, about 31 s left"

The time left is the time per step so far times the steps left (steps are about equally long in a training run).
"""

import time
from dataclasses import dataclass, field


@dataclass
class RunProgress:
    steps: int                        # the run's steps, as far as its paths tell (at least 1)
    read: int = 0
    tokens: int = 0
    clock: object = field(default=time.monotonic, repr=False)
    start: float = field(default=0.0)

    def __post_init__(self):
        self.steps = max(1, self.steps)
        self.start = self.clock()

    def add(self, tokens: int) -> None:
        self.read += 1
        self.tokens += tokens

    def share(self) -> float:
        return min(1.0, self.read / self.steps)

    def seconds(self) -> float:
        return self.clock() - self.start

    def text(self) -> str:
        """"12 of 50 steps, 24.1 M tokens, 2.30 M tokens/s, about 31 s left" (rate and time left once a step is read)."""
        done = f"{self.read:,} of {max(self.steps, self.read):,} steps"
        elapsed = self.seconds()
        if not self.read or elapsed <= 0:
            return done
        left = elapsed / self.read * max(self.steps - self.read, 0)
        return (f"{done}, {self.tokens / 1e6:,.1f} M tokens, {self.tokens / elapsed / 1e6:,.2f} M tokens/s, about "
                f"{left:,.0f} s left")
