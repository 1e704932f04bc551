"""The values a link may give each threshold of the catalogue at the ends of what it allows (not a test module)."""

from toylab.catalogue.estimators import ESTIMATORS, EXACT_IDS

POLICY_IDS = [id for id in EXACT_IDS if not ESTIMATORS[id].on_policy]
TEXT_VALUES = ("none", "None", "0.5", "2", "0.8_1.1", "1.25")    # tried on every text threshold; kept where it parses


def edges(param):
    """Each choice, each estimator it may name, both ends of a range and its default; for a text threshold its default
    and the texts of TEXT_VALUES it accepts (areal's "none" parses to None)."""
    if param.choices is not None:
        return list(param.choices)
    if param.parse is not None:
        accepted = []
        for text in (param.default, *TEXT_VALUES):
            try:
                param.parse(text)
            except ValueError:
                continue
            accepted.append(text)
        return list(dict.fromkeys(accepted))
    if isinstance(param.default, str):
        return POLICY_IDS
    return [param.low, param.default, param.high]


def text(value):
    """A threshold's value as a link writes it."""
    return value if isinstance(value, str) else f"{value:.10g}"


def thresholds_of(id, values):
    """{'id.name': text} of some of an estimator's thresholds."""
    return {f"{id}.{name}": text(value) for name, value in values.items()}
