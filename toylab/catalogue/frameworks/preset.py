"""A framework preset as data: the framework's configuration, the catalogue id it is closest to, what it equals.

A preset is a row: the framework's own configuration fields (a ``Ref`` marks one that is a parameter, under the
framework's name and default; a ``Joined`` one that joins several, as verl's "lower_upper" thresholds), the
catalogue id it is closest to (its colour is a shade of that id's), what it equals on the toy, the commit it was
read at, and one line wherever the framework's code and its documentation disagree. Each framework's module holds
its rows, the function ``factors`` that turns a configuration into registry ids with parameters, written from the
framework's code (its ``Rules``), and ``latex``, the coefficient in the framework's symbols.
"""

from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class Ref:
    """A configuration field set by the preset's parameter of this name."""
    name: str


@dataclass(frozen=True)
class Joined:
    """A configuration field set by several parameters, joined as text: verl's "{threshold_lower}_{threshold}"."""
    names: tuple
    separator: str = "_"

    def text(self, params):
        return self.separator.join(str(params[name]) for name in self.names)


@dataclass(frozen=True)
class Rules:
    """How a framework's code computes a configuration: the registry factors it multiplies, and its conventions.

    A factor is (registry id, parameters) or (registry id, parameters, False): False says that the framework only
    zeroes the weight there, leaving the masked tokens in its loss mask (and its loss's denominators); without it
    ``rejections_leave_loss_mask`` holds. ``clamp`` bounds log ratios before anything is exponentiated (verl,
    slime, SkyRL, ms-swift: 20; open-instruct: 10): each token's for a token ratio, and the raw sum Σ_t log ρ_t
    for W; a sequence's sum or mean of log ratios used by anything else is the sum or mean of the clamped tokens
    (verl's rejection statistics, ms-swift, open-instruct) or, with ``clamp_sums``, the clamp of the raw sum or
    mean (slime, Miles, SkyRL). ``mean_epsilon`` is what the framework's sequence means add to the token count
    (verl's and NeMo-RL's masked_mean: 10⁻⁸).
    """
    factors: list
    clamp: float | None = None
    rejections_leave_loss_mask: bool = True
    clamp_sums: bool = False
    mean_epsilon: float = 0.0


@dataclass(frozen=True)
class Preset:
    id: str                   # "<framework>:<option>"
    option: str               # how the framework spells it
    alias: str                # the name the framework's documentation gives it
    config: dict              # the framework's configuration fields (Ref: a parameter)
    base: str                 # the catalogue id it is closest to
    equals: str               # what it equals on the toy, under which parameter mapping
    params: dict = field(default_factory=dict)
    note: str = ""            # where the framework's code and documentation disagree
    commit: str = ""          # the framework's commit the row was read at
    batch: bool = False       # batch-coupled: its module's batch_family names the family (Monte Carlo only)
    code: str = ""            # where the framework's code computes it: file and lines at the commit

    @property
    def framework(self):
        return self.id.partition(":")[0]

    @property
    def parameter_names(self):
        """The parameters the configuration's Ref and Joined fields (or pairs of them) name."""
        def names(value):
            if isinstance(value, tuple):
                return set().union(*map(names, value))
            return {value.name} if isinstance(value, Ref) else set(value.names) if isinstance(value, Joined) else set()
        return set().union(*map(names, self.config.values()))

    def resolved(self, params):
        """The configuration with every Ref replaced by the parameter's value and every Joined by its text."""
        def value_of(value):
            if isinstance(value, tuple):
                return tuple(map(value_of, value))
            if isinstance(value, Ref):
                return params[value.name]
            return value.text(params) if isinstance(value, Joined) else value
        return {key: value_of(value) for key, value in self.config.items()}


def with_code(presets, code):
    """The presets with their ``code`` citation: code[option], else code["*"] (the file and lines that compute it)."""
    return [replace(preset, code=code.get(preset.id.partition(":")[2], code.get("*", ""))) for preset in presets]


def shade(colour, step):
    """The colour mixed toward black (even steps) or white (odd steps), 8 % + 7 % more every two steps (at most
    twelve shades each way)."""
    if step >= 24:
        raise ValueError(f"{colour} has more than 24 shades")
    amount = 0.08 + 0.07 * (step // 2)
    channels = [int(colour[i:i + 2], 16) for i in (1, 3, 5)]
    target = 0 if step % 2 == 0 else 255
    mixed = [round(c + (target - c) * amount) for c in channels]
    return "#" + "".join(f"{c:02X}" for c in mixed)
