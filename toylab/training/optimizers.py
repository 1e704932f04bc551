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

    def proposed(self, gradients):
        """The steps it would take for each of several gradients (..., *shape), leaving its state as it is."""
        return self.lr * gradients


class Adam:
    def __init__(self, lr, shape):
        self.lr = lr
        self.m, self.v, self.k = np.zeros(shape), np.zeros(shape), 0

    def step(self, gradient):
        self.k += 1
        self.m, self.v, step = self._moved(gradient, self.k)
        return step

    def proposed(self, gradients):
        """The steps it would take for each of several gradients (..., *shape), leaving its state as it is."""
        return self._moved(gradients, self.k + 1)[2]

    def _moved(self, gradient, k):
        m = BETA1 * self.m + (1 - BETA1) * gradient
        v = BETA2 * self.v + (1 - BETA2) * gradient**2
        m_hat, v_hat = m / (1 - BETA1**k), v / (1 - BETA2**k)
        return m, v, self.lr * m_hat / (np.sqrt(v_hat) + EPSILON)


def make_optimizer(name, lr, shape):
    """The update rule called ``name`` (sgd or adam) for parameters of the given shape."""
    if name not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {name!r}; choose {' or '.join(OPTIMIZERS)}")
    return {"sgd": SGD, "adam": Adam}[name](lr, shape)
