"""What every framework's KL generator shares: the tokens its KL code runs on, autograd's per-token derivative, and the
data file it writes.

A KL generator (``<framework>/kl_generate.py``) holds its framework's KL code copied verbatim (repository, commit,
path and lines above each block; ``verbatim.py`` checks them against a clone) and runs it, with torch, on:

- ``loss_tokens``: one-token rows (log π_θ, log π_old, log μ, log π_ref) at log ratios x = log π_θ − log π_ref near 0
  (0, ±10⁻³, ±0.1), moderate and far (±0.7, ±2, ±5, ±12), 10⁻⁴ on each side of the ±20 and ±40 clamps of x and
  beyond them (±21, ±25, ±45), and 10⁻⁴ (in log) on each side of where the term h·k(x) reaches a value clamp c
  (both branches of x), each at ratios h = π_θ/π_old = π_θ/μ of e^{−0.7}, 1, e^{0.5} and e^{3} for a framework
  with a ratio; the framework's per-token term ℓ and its derivative ∂ℓ/∂log π_θ by autograd (every token alone:
  the terms are elementwise, so the gradient of their sum is each token's);
- ``reward_batch``: three sequences of 5, 3 and 4 response tokens (padding after) with log π_old, log π_ref and a
  reward each; the framework's advantage built with the penalty and without it (β = 0), whose difference is −β·K_t
  per token.

    python tests/catalogue/reference/<framework>/kl_generate.py

writes ``<framework>/kl_numbers.json``.
"""

import json
import math
import platform
from pathlib import Path

import torch

STEP = 1e-4
NEAR = (0.0, 1e-3, -1e-3, 0.1, -0.1)
FAR = (0.7, -0.7, 2.0, -2.0, 5.0, -5.0, 12.0, -12.0)
CLAMPS = (20.0, 40.0)
BEYOND = (21.0, -21.0, 25.0, -25.0, 45.0, -45.0)
LOG_RATIOS = (-0.7, 0.0, 0.5, 3.0)              # log h: π_θ/π_old and π_θ/μ
HIGH = -0.2                                     # the likelier side's log-probability


def _values():
    return {"k1": lambda x: x, "k2": lambda x: x * x / 2, "abs": abs, "k3": lambda x: math.expm1(-x) + x}


def value_clamp_crossings(estimator, bound, log_h):
    """x where h·k(x) = bound·e^{∓10⁻⁴}, on each branch of x (k1 only above 0: its value is negative below)."""
    k = _values()[estimator.rstrip("+")]
    h = math.exp(log_h)
    crossings = []
    for sign in (1.0, -1.0) if estimator.rstrip("+") != "k1" else (1.0,):
        for offset in (-STEP, STEP):
            target = bound * math.exp(offset) / h
            low, high = 0.0, 60.0
            if k(sign * high) < target:
                continue
            for _ in range(200):
                middle = (low + high) / 2
                low, high = (middle, high) if k(sign * middle) < target else (low, middle)
            crossings.append(sign * (low + high) / 2)
    return crossings


def log_ratios(estimator=None, value_clamp=None, log_h=0.0):
    xs = list(NEAR + FAR + BEYOND) + [s * (c + d) for c in CLAMPS for s in (1, -1) for d in (-STEP, STEP)]
    if value_clamp is not None:
        xs += value_clamp_crossings(estimator, value_clamp, log_h)
    return xs


def token(x, log_h=0.0):
    """(log π_θ, log π_old, log μ, log π_ref) with log π_θ − log π_ref = x (to rounding) and π_θ/π_old = π_θ/μ = h."""
    log_pi, log_ref = (HIGH, HIGH - x) if x >= 0 else (HIGH + x, HIGH)
    return log_pi, log_pi - log_h, log_pi - log_h, log_ref


def loss_tokens(estimator, value_clamp=None, ratios=False):
    """The probe tokens as four lists; with ``ratios`` every x at each ratio of LOG_RATIOS."""
    rows = [token(x, log_h) for log_h in (LOG_RATIOS if ratios else (0.0,))
            for x in log_ratios(estimator, value_clamp, log_h)]
    return {name: [r[i] for r in rows] for i, name in enumerate(("log_pi", "log_old", "log_mu", "log_ref"))}


def probe_values(function, estimator, value_clamp=None):
    """(tokens, values): ``function(log_policy, log_ref)`` (float64 tensors) on the probe tokens."""
    tokens = loss_tokens(estimator, value_clamp)
    values = function(torch.tensor(tokens["log_pi"], dtype=torch.float64),
                      torch.tensor(tokens["log_ref"], dtype=torch.float64))
    return tokens, as_list(values)


def per_token(term_of, tokens):
    """(ℓ, ∂ℓ/∂log π_θ) per token: ``term_of(log_pi, log_old, log_mu, log_ref)`` on (1, n) float64 tensors (a loss
    summed over the tokens: no ℓ, the derivative only)."""
    log_pi = torch.tensor([tokens["log_pi"]], dtype=torch.float64, requires_grad=True)
    others = [torch.tensor([tokens[name]], dtype=torch.float64) for name in ("log_old", "log_mu", "log_ref")]
    term = term_of(log_pi, *others)
    (gradient,) = torch.autograd.grad(term.sum(), log_pi, allow_unused=True)
    gradient = torch.zeros_like(log_pi) if gradient is None else gradient
    return (as_list(term[0]) if term.dim() else None), as_list(gradient[0])


REWARD_BATCH = {
    "log_old": [[-0.3, -1.1, -0.05, -2.2, -0.6, 0.0], [-0.9, -0.2, -1.7, 0.0, 0.0, 0.0],
                [-0.4, -0.8, -3.0, -0.1, 0.0, 0.0]],
    "log_ref": [[-0.5, -0.7, -0.4, -1.0, -1.6, 0.0], [-0.2, -0.9, -1.1, 0.0, 0.0, 0.0],
                [-1.9, -0.3, -0.6, -0.1, 0.0, 0.0]],
    "mask": [[1, 1, 1, 1, 1, 0], [1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 0, 0]],
    "rewards": [1.0, 0.0, 1.0],
}


def as_list(tensor):
    return [float(v) for v in torch.as_tensor(tensor).detach().to(torch.float64).reshape(-1)]


class KLNumbers:
    """The data file a KL generator writes: per loss preset the probe tokens, ℓ and ∂ℓ/∂log π_θ; per reward preset
    the batch, the per-token values k and the penalty β·K_t the framework subtracts from each token's advantage."""

    def __init__(self, framework, repository, commit, generator, notes=""):
        self.data = {"framework": framework, "repository": repository, "commit": commit, "generator": generator,
                     "notes": notes, "torch": torch.__version__, "python": platform.python_version(),
                     "loss": [], "reward": []}

    def loss(self, preset, setting, tokens, term, derivative, float32=False):
        self.data["loss"].append({"preset": preset, "setting": setting, "tokens": tokens, "term": term,
                                  "derivative": derivative, "float32": float32})

    def reward(self, preset, setting, beta, values, penalty, float32=False, probe=None):
        """``probe``: (tokens, values) of the framework's KL value function on ``loss_tokens`` (at π_old: its
        log_pi), where its clamps are."""
        entry = {"preset": preset, "setting": setting, "beta": beta, "batch": REWARD_BATCH, "values": values,
                 "penalty": penalty, "float32": float32}
        if probe is not None:
            entry["probe"] = {"tokens": probe[0], "values": probe[1]}
        self.data["reward"].append(entry)

    def write(self, folder):
        path = Path(folder) / "kl_numbers.json"
        path.write_text(json.dumps(self.data, indent=1) + "\n")
        print(f"wrote {path}: {len(self.data['loss'])} loss and {len(self.data['reward'])} reward checks")
