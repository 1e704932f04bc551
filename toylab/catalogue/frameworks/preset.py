"""A framework preset as data: the framework's configuration, the catalogue id it is closest to, what it equals.

A preset is a row: the framework's own configuration fields (a ``Ref`` marks one that is a parameter, under the
framework's name and default), the catalogue id it is closest to (its colour is a shade of that id's), what it
equals on the toy, and one line wherever the framework's code and its documentation disagree. Each framework's
module (``verl``, ``trl``) holds its rows, the function ``factors`` that turns a configuration into registry ids
with parameters, written from the framework's code, and ``latex``, the coefficient in the framework's symbols.
"""

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Ref:
    """A configuration field set by the preset's parameter of this name."""
    name: str


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

    @property
    def framework(self):
        return self.id.partition(":")[0]

    def resolved(self, params):
        """The configuration with every Ref replaced by the parameter's value."""
        return {key: params[value.name] if isinstance(value, Ref) else value for key, value in self.config.items()}


def shade(colour, step):
    """The colour mixed toward black (even steps) or white (odd steps), 22 % more every two steps."""
    amount = 0.22 * (step // 2 + 1)
    channels = [int(colour[i:i + 2], 16) for i in (1, 3, 5)]
    target = 0 if step % 2 == 0 else 255
    mixed = [round(c + (target - c) * amount) for c in channels]
    return "#" + "".join(f"{c:02X}" for c in mixed)
