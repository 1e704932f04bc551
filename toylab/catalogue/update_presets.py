"""Every framework's update presets in one table: a framework's module lists its ``UPDATES`` (``updates.UpdatePreset``
rows: the anchor, the loss and its parameters, minibatches × epochs, its correction and pipeline presets, its
default staleness and where its code computes the loss), and this table gathers them by id. A framework with update
presets only (no correction presets: PipelineRL) is in UPDATE_ONLY."""

from toylab.catalogue.frameworks import pipelinerl
from toylab.catalogue.presets import FRAMEWORKS

UPDATE_ONLY = (pipelinerl,)
UPDATE_PRESETS = {preset.id: preset for module in (*dict.fromkeys(FRAMEWORKS.values()), *UPDATE_ONLY)
                  for preset in getattr(module, "UPDATES", ())}
