"""The toys a lesson claims its statement for, and how often it holds among them.

A lesson's claim is a predicate the library evaluates exactly on one setting: ``Evidence.holds`` of its check —
True, False, or None where the claim does not apply (e.g. a top-p that cuts nothing, for a claim about what top-p
cuts). A claim about one toy is an anecdote; a lesson claims it for a ``Population``: SEEDS at the lesson's own
setting and at each neighbour it generalises to (a ``Group``: a few of the lesson's sidebar values changed, e.g.
twice the mismatch or another T). The lesson claims it holds at CLAIMED or more of each group's toys, unless its
text states the group's share ("at twice the mismatch, at 13 of 30"): then ``Group.stated`` is that count.

A ``Tally`` is the claim evaluated over one group (``shares.tally`` computes it): at each seed whether the claim
holds, so the toys that break it, the counterexamples, are named. A toy the page refuses (too large, or its
pipeline leaves J flat) counts as one where the claim does not apply.

    Population((AT_SETTING, Group("at twice the mismatch", (("mismatch", 2.0),), stated=13)))
    around(1.0, ("T", 4))          the usual one: the setting, half and twice its mismatch, one other size
"""

from dataclasses import dataclass, field

SEEDS = tuple(range(30))
CLAIMED = 0.9


@dataclass(frozen=True)
class Group:
    """Toys of a population: the lesson's setting with ``changes`` ((sidebar key, value), …) at every seed."""
    label: str                  # how the page names the group: "at its setting", "at twice the mismatch", "at T = 4"
    changes: tuple = ()
    stated: int | None = None   # the count of toys where the lesson's text says the claim holds; None: ≥ CLAIMED


AT_SETTING = Group("at its setting")


@dataclass(frozen=True)
class Population:
    groups: tuple = (AT_SETTING,)       # Groups; the first is the lesson's own setting
    seeds: tuple = SEEDS


@dataclass(frozen=True)
class Tally:
    """A lesson's claim over one group: ``holds[i]`` at ``seeds[i]``, True, False or None (it does not apply)."""
    group: Group
    seeds: tuple
    holds: tuple = field(repr=False)

    @property
    def count(self):
        """The toys where the claim holds."""
        return sum(held is True for held in self.holds)

    @property
    def applicable(self):
        """The toys the claim applies to."""
        return sum(held is not None for held in self.holds)

    @property
    def share(self):
        return self.count / self.applicable if self.applicable else float("nan")

    @property
    def broken(self):
        """The seeds where the claim does not hold: the counterexamples."""
        return tuple(seed for seed, held in zip(self.seeds, self.holds, strict=True) if held is False)

    @property
    def met(self):
        """Whether the claim holds as the lesson claims: at its stated count, or at CLAIMED or more of the toys."""
        return self.count == self.group.stated if self.group.stated is not None else self.share >= CLAIMED

    def __str__(self):
        """'at its setting, 29 of 30' (and how many it does not apply to)."""
        left = len(self.seeds) - self.applicable
        return f"{self.group.label}, {self.count} of {self.applicable}" + (f" ({left} not applicable)" if left else "")


def around(mismatch, other, stated=None):
    """The usual population of a lesson at ``mismatch``: its setting, half and twice its mismatch, and one other
    size ``other``, a (sidebar key, value) pair such as ("T", 4). ``stated``: {"setting" | "half" | "twice" |
    "other": count} for the groups whose share the lesson's text states."""
    stated = stated or {}
    name, value = other
    return Population((
        Group(AT_SETTING.label, stated=stated.get("setting")),
        Group("at half the mismatch", (("mismatch", mismatch / 2),), stated.get("half")),
        Group("at twice the mismatch", (("mismatch", mismatch * 2),), stated.get("twice")),
        Group(f"at {name} = {value}", ((name, value),), stated.get("other"))))
