"""The two update rules of the training loop, for gradient ascent on arrays of any shape (one θ per row).

    sgd:   Δθ = lr·g
    adam:  m ← β₁m + (1 − β₁)g,  v ← β₂v + (1 − β₂)g²,  Δθ = lr·m̂ / (sqrt(v̂) + ε),
           m̂ = m/(1 − β₁ᵏ), v̂ = v/(1 − β₂ᵏ) at step k = 1, 2, …   (Kingma & Ba 2015, Algorithm 1, ascent)
"""

import numpy as np

OPTIMIZERS = ("sgd", "adam")
BETA1, BETA2, EPSILON = 0.9, 0.999, 1e-8


class SGD:
    def __init__(self, lr, shape):
        self.lr = lr

    def step(self, gradient):
        return self.lr * gradient


class Adam:
    def __init__(self, lr, shape):
        self.lr = lr
        self.m, self.v, self.k = np.zeros(shape), np.zeros(shape), 0

    def step(self, gradient):
        self.k += 1
        self.m = BETA1 * self.m + (1 - BETA1) * gradient
        self.v = BETA2 * self.v + (1 - BETA2) * gradient**2
        m_hat, v_hat = self.m / (1 - BETA1**self.k), self.v / (1 - BETA2**self.k)
        return self.lr * m_hat / (np.sqrt(v_hat) + EPSILON)


def make_optimizer(name, lr, shape):
    """The update rule called ``name`` (sgd or adam) for parameters of the given shape."""
    if name not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {name!r}; choose {' or '.join(OPTIMIZERS)}")
    return {"sgd": SGD, "adam": Adam}[name](lr, shape)
