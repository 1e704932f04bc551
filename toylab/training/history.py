"""The versions a version-switch analysis reads: on_policy's exact run, step by step."""

from toylab.training.loop import TrainingConfig, train


def history_of(toy, steps, lr, optimizer="sgd"):
    """v ↦ θ_{k−v}, k = ``steps``, along on_policy's exact ascent on J (θ₀ before the run): the versions
    ``analysis.versions`` reads."""
    thetas = train(toy, {"on_policy": {}}, "none", TrainingConfig(steps=steps, lr=lr, optimizer=optimizer))[
        "on_policy"].theta
    return lambda v: thetas[max(steps - v, 0)]
