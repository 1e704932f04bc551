"""Every framework's presets in one table: which module holds a framework's rows, factors and formulas.

Adding a framework is one module in ``frameworks/`` (copy ``frameworks/trl.py``: PRESETS, ``factors`` returning
its ``Rules``, and ``latex``) and one entry in FRAMEWORKS below; the registry (``estimators``) picks its presets up.
"""

from toylab.catalogue.frameworks import (
    areal,
    ms_swift,
    nemo_rl,
    open_instruct,
    openrlhf,
    prime_rl,
    roll,
    skyrl,
    slime,
    trl,
    verl,
)
from toylab.catalogue.frameworks.preset import shade

FRAMEWORKS = {"verl": verl, "trl": trl, "slime": slime, "miles": slime, "skyrl": skyrl, "openrlhf": openrlhf,
              "nemo_rl": nemo_rl, "areal": areal, "roll": roll, "prime_rl": prime_rl, "ms_swift": ms_swift,
              "open_instruct": open_instruct}
PRESETS = [preset for module in dict.fromkeys(FRAMEWORKS.values()) for preset in module.PRESETS]
BY_ID = {preset.id: preset for preset in PRESETS}


def rules(preset, params):
    """The preset's configuration, its parameters set, turned into ``Rules`` (registry ids with parameters, and
    the framework's clamp and means) by its framework's module."""
    return FRAMEWORKS[preset.framework].factors(preset.resolved(params))


def check(preset, params):
    """Raise ValueError where the framework's own code refuses the configuration (its module's ``check``, written
    from its config validation), so that a preset is only ever a combination the framework runs."""
    module = FRAMEWORKS[preset.framework]
    if hasattr(module, "check"):
        module.check(preset.resolved(params))


def batch_family(preset, params):
    """(registry id, parameters) of the batch-coupled family a batch-coupled preset is (AReaL's m2_threshold)."""
    return FRAMEWORKS[preset.framework].batch_family(preset.resolved(params))


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
        source = (f"{preset.option} — {preset.alias} ({preset.framework} {preset.commit}: {preset.code}); on the toy: "
                  f"{preset.equals}")
        rows.append((preset, {
            "id": preset.id, "label": f"{preset.framework} {preset.id.partition(':')[2]} ({preset.alias})",
            "latex": latex(preset), "source": source + (f". Code vs docs: {preset.note}" if preset.note else ""),
            "params": preset.params, "colour": shade(base_colours[preset.base], step), "framework": preset.framework}))
    return rows
