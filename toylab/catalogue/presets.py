"""Every framework's presets in one table: which module holds a framework's rows, factors and formulas.

Adding a framework is one module in ``frameworks/`` (copy ``frameworks/trl.py``: PRESETS, ``factors`` and
``latex``) and one entry in FRAMEWORKS below; the registry (``estimators``) picks its presets up.
"""

from toylab.catalogue.frameworks import trl, verl
from toylab.catalogue.frameworks.preset import shade

FRAMEWORKS = {"verl": verl, "trl": trl}
PRESETS = [preset for framework in FRAMEWORKS.values() for preset in framework.PRESETS]


def factors(preset, params):
    """(factors, clamp, rejections leave the loss mask): the preset's configuration, its parameters set, turned
    into registry ids with parameters by its framework's rules."""
    return FRAMEWORKS[preset.framework].factors(preset.resolved(params))


def latex(preset):
    return FRAMEWORKS[preset.framework].latex(preset)


def registry_rows(base_colours):
    """(preset, keyword arguments of its registry Estimator but the weights) per preset; colours shade the base
    estimator's hue."""
    used = {}
    rows = []
    for preset in PRESETS:
        step = used.get(preset.base, 0)
        used[preset.base] = step + 1
        source = f"{preset.option} — {preset.alias}; on the toy: {preset.equals}"
        rows.append((preset, {
            "id": preset.id, "label": f"{preset.framework} {preset.id.partition(':')[2]} ({preset.alias})",
            "latex": latex(preset), "source": source + (f". Code vs docs: {preset.note}" if preset.note else ""),
            "params": preset.params, "colour": shade(base_colours[preset.base], step), "framework": preset.framework}))
    return rows
