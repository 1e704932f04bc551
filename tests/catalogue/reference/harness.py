"""What every framework's generator shares: the batches its code runs on, the boundary probes, the coefficient a
loss gives each token, and the data file it writes.

A generator (``<framework>/generate.py``) holds its framework's functions copied verbatim (repository, commit, path
and lines above each block, ``verbatim.py`` checks them against a clone) and runs them, with torch, on:

- ``ragged``: five sequences of 6, 4, 5, 6 and 1 tokens, padding 0 in both log-probs (``RAGGED``): row 0 nearly
  on-policy, row 1 probability gaps π − μ of +0.33 and −0.54, row 2 a token at log ρ = 12 and one at −9.5 (below
  slime's 10⁻⁴ veto), row 4 a single token at ρ = 3; verl and TRL ran on their own four rows (``VERL_BATCH``);
- ``probes`` (``probe_batch``): the boundaries. One token at |log ρ| = 12, 20, 21, 25 and 30 with the five others
  of the opposite sign, summing to 0 or to ±5 (so a clamp of each token and a clamp of the sum disagree); and at
  every threshold of the preset's setting, a ratio 10⁻⁴ below and above it (each token, the product W over a
  sequence, the geometric mean over a sequence) and, where exp(log c) is c itself, at it exactly. Every row comes
  twice, with A = +0.9 and A = −0.6.

The coefficient of token t of sequence b is c[b, t] = −∂loss/∂log π(y_{b,t}) / A_b, the loss built as the
framework builds it with the trainer's log-probs as the old policy (the toy's single step), its aggregation undone
as each generator says. Run a generator with a Python that has torch (a scratch environment: torch is never a
dependency of toylab or of its tests), from the repository's root:

    python tests/catalogue/reference/<framework>/generate.py

It rewrites ``<framework>/numbers.json``: the framework, its repository and commit, the batches, and per case the
preset, its parameters, the batch, the coefficients and (where the framework returns one) the loss mask it leaves.

Three policies (issue 37): ``update_probes`` builds batches of one-token rows with log π_θ ("trainer"), log π_old
("old") and log μ ("sampler"), at PPO ratios r = π_θ/π_old and engine ratios w = π_old/μ 10⁻⁴ (in log) on each side
of every clip, cap and bound of a setting, near 1, far beyond them (|log r| 1, 3, 21 and 25: beyond ±20 clamps), at
combined ratios π_θ/μ on each side of each bound with w ≠ 1, and at probability gaps π_θ − μ on each side of a
probability threshold (DPPO masks); every row with A = +0.9 and A = −0.6. ``per_token`` runs a framework's loss
on each row alone (one token: every aggregation of the framework is that token's loss) and records the token's loss
and its gradient ∂loss/∂log π_θ by autograd; ``Numbers.update`` files them under "updates", beside the cases.
"""

import json
import math
import platform
import sys
from pathlib import Path

import numpy as np
import torch

T = 6
POSITIVE, NEGATIVE = 0.9, -0.6              # the two advantages every probe row is run with
CLAMP_MAGNITUDES = (12.0, 20.0, 21.0, 25.0, 30.0)
CLAMP_SUMS = (0.0, 5.0)
STEP = 1e-4                                 # the probes' distance from a threshold, in log ratio

RAGGED = {
    "sampler": [[-0.05, -1.2, -0.3, -2.0, -0.7, -0.02], [-0.9, -0.1, -1.6, -0.4, 0.0, 0.0],
                [-13.0, -0.2, -0.45, -1.3, -0.6, 0.0], [-2.3, -0.5, -1.1, -3.0, -0.25, -0.8],
                [-1.5, 0.0, 0.0, 0.0, 0.0, 0.0]],
    "trainer": [[-0.046, -1.2029999999999998, -0.298, -2.006, -0.695, -0.0225],
                [-0.30000000000000004, -1.0, -1.25, -0.020000000000000018, 0.0, 0.0],
                [-1.0, -9.7, -0.25, -1.4000000000000001, -0.5499999999999999, 0.0],
                [-2.05, -0.9, -0.30000000000000004, -3.15, -0.04999999999999999, -1.4],
                [-0.3999999999999999, 0.0, 0.0, 0.0, 0.0, 0.0]],
    "mask": [[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1], [1, 0, 0, 0, 0, 0]],
    "advantages": [1.0, -0.8, 0.6, -1.3, 0.9],
}

# verl's and TRL's batch: row 1's mean log ratio is log 1.18; row 2 has log ratios −22 and 20, where verl's ±20
# clamp of each token turns a kept sum (Σ log ρ = −0.4) into a rejected one (1.6)
_VERL_LOG_RATIO = [[0.1, -0.05, 0.2, -0.3, 0.02], [0.4, 1.2, -1.1, 5.0, -7.0], [-22.0, 20.0, 1.5, 0.0, 0.1],
                   [0.001, -0.002, 0.0005, 0.0015, 3.0]]
_VERL_SAMPLER = [[-1.2, -0.7, -2.0, -0.9, -1.5], [-0.8, -2.5, -0.6, -9.0, -0.2], [-1.0, -25.0, -3.0, -0.4, -1.1],
                 [-0.3, -0.5, -0.9, -1.3, -4.0]]
VERL_BATCH = {
    "sampler": _VERL_SAMPLER,
    "trainer": (np.array(_VERL_SAMPLER) + np.array(_VERL_LOG_RATIO)).tolist(),
    "mask": [[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 1, 1, 1, 0]],
    "advantages": [1.0, -0.5, -0.7, 1.2],
}


# -- the probes -----------------------------------------------------------------------------------------------

def token(log_ratio, position):
    """(trainer, sampler) log-probabilities of a token with this log ratio, trainer − sampler equal to it to the
    last bit: the likelier side at a probability that varies with the position (e^−0.1 … e^−0.6), the other
    below it; where that rounds, the pair (−x, −2x) (or (2x, x) for x < 0), whose difference is exact."""
    high = -0.1 * (1 + position % 6)
    pair = (high, high - log_ratio) if log_ratio >= 0 else (high + log_ratio, high)
    if pair[0] - pair[1] == log_ratio:
        return pair
    return (-log_ratio, -2 * log_ratio) if log_ratio >= 0 else (2 * log_ratio, log_ratio)


def row(log_ratios):
    """A probe row of T tokens (padding 0 after the given log ratios)."""
    pairs = [token(x, t) for t, x in enumerate(log_ratios)]
    padding = T - len(pairs)
    return ([p[0] for p in pairs] + [0.0] * padding, [p[1] for p in pairs] + [0.0] * padding,
            [1] * len(pairs) + [0] * padding)


def clamp_rows():
    """One token at ±m, the five others of the opposite sign with the row's sum 0 or ±5."""
    rows = []
    for m in CLAMP_MAGNITUDES:
        for sign in (1.0, -1.0):
            for total in CLAMP_SUMS:
                rest = -sign * (m - total) / (T - 1)
                rows.append(row([sign * m] + [rest] * (T - 1)))
    return rows


def threshold_rows(ratio, float32=False):
    """At a ratio threshold c: one row with tokens at log c ∓ 10⁻⁴, and each alone (a sequence's largest ratio);
    two rows whose W is c·e^∓10⁻⁴ and two whose geometric mean is, their tokens spread around; and a one-token row
    at log c exactly when exp(log c) is c in float64 in every library (libm, numpy and torch differ by an ulp at
    some) and in float32 for a framework that exponentiates in float32: there the inequality's strictness
    decides."""
    x = math.log(ratio)
    rows = [row([x - STEP, x + STEP, 0.01, -0.01, 0.002, 0.0]), row([x - STEP]), row([x + STEP])]
    for offset in (-STEP, STEP):
        rows.append(row([0.3, -0.2, x + offset - 0.1]))
        geometric = x + offset
        rows.append(row([geometric + 0.2, geometric - 0.2, geometric + 0.1, geometric - 0.1, geometric, geometric]))
    exact = math.exp(x) == float(np.exp(x)) == float(torch.exp(torch.tensor(x, dtype=torch.float64))) == ratio
    if float32:
        exact = exact and float(torch.exp(torch.tensor(x, dtype=torch.float32))) == ratio
    if exact:
        rows.append(row([x]))
    return rows


def statistic_rows(function, target, sums=True):
    """Rows where a per-token statistic f(log ρ) (increasing in |log ρ|, f(0) below the target) is at the
    target·e^∓10⁻⁴, on each side of log ρ = 0: one such token alone (its value, sum, mean and max), T of them
    (their mean and max) and, with ``sums``, T tokens at target/T each (their sum)."""
    rows = []
    for sign in (1.0, -1.0):
        for offset in (-STEP, STEP):
            value = target * math.exp(offset)
            x = sign * _solve(lambda x, sign=sign: function(sign * x), value, 0.0, 30.0)
            rows += [row([x]), row([x] * T)]
            if sums:
                share = sign * _solve(lambda x, sign=sign: function(sign * x), value / T, 0.0, 30.0)
                rows.append(row([share] * T))
    return rows


def _solve(function, target, low, high):
    """x in [low, high] with function(x) = target, function increasing (bisection to the last bit)."""
    for _ in range(200):
        middle = (low + high) / 2
        if function(middle) < target:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def probability_statistic_rows(function, target, samplers=(0.3, 0.6), sums=True):
    """The same for a statistic f(π, μ) of the sampled token's probabilities (growing as π moves away from μ: a
    probability difference, a Bernoulli KL): for each sampler probability μ, with π above it and below it."""
    pairs = []
    for mu in samplers:
        for direction, room in ((1.0, 1.0 - mu), (-1.0, mu)):
            for offset in (-STEP, STEP):
                def gap(value, d=direction, m=mu, r=room):
                    return m + d * _solve(lambda t: function(m + d * t, m), value, 0.0, r * (1 - 1e-12))
                value = target * math.exp(offset)
                token = (gap(value), mu)
                pairs += [[token], [token] * T]
                if sums:
                    pairs.append([(gap(value / T), mu)] * T)
    return probability_rows(pairs)


def probability_rows(pairs):
    """Rows of tokens given as (π, μ) probabilities."""
    rows = []
    for tokens in pairs:
        trainer = [math.log(p) for p, _ in tokens]
        sampler = [math.log(q) for _, q in tokens]
        padding = T - len(tokens)
        rows.append((trainer + [0.0] * padding, sampler + [0.0] * padding, [1] * len(tokens) + [0] * padding))
    return rows


def probe_batch(ratios=(), extra=(), float32=False):
    """The clamp rows, the threshold rows of each ratio threshold (> 0), and any ``extra`` rows, each with
    A = +0.9 and A = −0.6."""
    rows = clamp_rows() + [r for ratio in ratios if ratio > 0 for r in threshold_rows(ratio, float32)] + list(extra)
    doubled = [(r, a) for r in rows for a in (POSITIVE, NEGATIVE)]
    return {"trainer": [r[0] for r, _ in doubled], "sampler": [r[1] for r, _ in doubled],
            "mask": [r[2] for r, _ in doubled], "advantages": [a for _, a in doubled]}


# -- three policies --------------------------------------------------------------------------------------------

LOG_RATIOS = (0.0, 0.05, -0.05, 1.0, -1.0, 3.0, -3.0, 21.0, -21.0, 25.0, -25.0)     # log r: 1, near 1, far, beyond ±20
LOG_WEIGHTS = (0.0, 0.5, -0.5, 3.0, -3.0)                                            # log w: 1, near 1, far
COMBINED_SHIFTS = (0.5, -0.5)                    # log w of the rows whose combined ratio π_θ/μ sits at a bound


def policy_token(log_ratio, log_weight, position=0):
    """(log π_θ, log π_old, log μ) of a token with log r = log π_θ − log π_old and log w = log π_old − log μ (to
    the rounding of the sums), the largest of the three at −0.1·(1 + position mod 6)."""
    top = -0.1 * (1 + position % 6) - max(0.0, log_weight, log_weight + log_ratio)
    return top + log_weight + log_ratio, top + log_weight, top


def probability_token(pi, old, mu):
    """(log π_θ, log π_old, log μ) of a token given as probabilities."""
    return math.log(pi), math.log(old), math.log(mu)


def _sides(ratio):
    return (math.log(ratio) - STEP, math.log(ratio) + STEP)


def update_probes(ratios=(), weights=(), combined=(), gaps=(), samplers=(0.3, 0.6)):
    """One-token rows, each twice (A = +0.9, −0.6): every log r of LOG_RATIOS and 10⁻⁴ on each side of each PPO
    bound in ``ratios`` (1 − ε_low, 1 + ε_high, c, …; a bound ≤ 0 has no side), crossed with every log w of LOG_WEIGHTS and 10⁻⁴ on each
    side of each bound of the engine correction in ``weights`` (a TIS cap, IcePop bounds); rows whose combined
    ratio π_θ/μ is 10⁻⁴ on each side of each bound in ``combined`` while w = e^±0.5; and, for each probability
    threshold δ in ``gaps`` and sampler probability μ in ``samplers``, π_θ = μ ± δ·e^∓10⁻⁴ (and ±δ/2, ±1.5·δ
    where they fit) with π_old = μ and with π_old = μ·e^0.3."""
    ratios, weights, combined = ([b for b in bounds if b > 0] for bounds in (ratios, weights, combined))
    xs = list(LOG_RATIOS) + [x for ratio in ratios for x in _sides(ratio)]
    ys = list(LOG_WEIGHTS) + [y for weight in weights for y in _sides(weight)]
    tokens = [policy_token(x, y, i) for i, (x, y) in enumerate((x, y) for x in xs for y in ys)]
    tokens += [policy_token(z - y, y, i) for i, (z, y) in enumerate(
        (z, y) for ratio in combined for z in _sides(ratio) for y in COMBINED_SHIFTS)]
    for delta in gaps:
        for mu in samplers:
            for gap in (delta * math.exp(-STEP), delta * math.exp(STEP), delta / 2, 1.5 * delta):
                for sign in (1.0, -1.0):
                    pi = mu + sign * gap
                    if 0.0 < pi < 1.0:
                        tokens += [probability_token(pi, mu, mu), probability_token(pi, mu * math.exp(0.3), mu)]
    doubled = [(t, a) for t in tokens for a in (POSITIVE, NEGATIVE)]
    return {"trainer": [[t[0]] for t, _ in doubled], "old": [[t[1]] for t, _ in doubled],
            "sampler": [[t[2]] for t, _ in doubled], "mask": [[1] for _ in doubled],
            "advantages": [a for _, a in doubled]}


def per_token(loss_fn, batch):
    """(loss, gradient), each (B, 1): ``loss_fn(b, trainer, old, sampler, mask, advantages)`` run on each one-token
    row b alone (float64 tensors of shape (1, 1), advantages (1,); trainer requires grad) returns the framework's
    scalar loss, and the gradient is its ∂/∂log π_θ by autograd. (A correction whose metrics need more than one
    token is computed on the whole batch first and looked up by b.)"""
    losses, gradients = [], []
    for b in range(len(batch["advantages"])):
        trainer = torch.tensor(batch["trainer"][b:b + 1], dtype=torch.float64, requires_grad=True)
        old, sampler, mask = (torch.tensor(batch[key][b:b + 1], dtype=torch.float64)
                              for key in ("old", "sampler", "mask"))
        advantages = torch.tensor(batch["advantages"][b:b + 1], dtype=torch.float64)
        loss = loss_fn(b, trainer, old, sampler, mask, advantages)
        (gradient,) = torch.autograd.grad(loss, trainer, allow_unused=True)
        losses.append([float(loss.detach())])
        gradients.append([0.0 if gradient is None else float(gradient[0, 0])])
    for values in (losses, gradients):
        if not all(math.isfinite(v[0]) for v in values):
            raise ValueError("a loss or a gradient is not finite")
    return losses, gradients


# -- running a loss --------------------------------------------------------------------------------------------

def tensors(batch):
    """(trainer log-probs requiring grad, sampler log-probs, mask as float, advantages (B,)) in float64."""
    trainer = torch.tensor(batch["trainer"], dtype=torch.float64, requires_grad=True)
    sampler = torch.tensor(batch["sampler"], dtype=torch.float64)
    mask = torch.tensor(batch["mask"], dtype=torch.float64)
    return trainer, sampler, mask, torch.tensor(batch["advantages"], dtype=torch.float64)


def coefficients(loss, trainer, advantages, scale=1.0):
    """c = −∂loss/∂log π / A_b × scale (a number or a (B, T) or (B, 1) tensor that undoes the aggregation)."""
    (gradient,) = torch.autograd.grad(loss, trainer, allow_unused=True)
    if gradient is None:
        gradient = torch.zeros_like(trainer)
    return (-gradient / advantages[:, None] * scale).detach()


def as_list(tensor):
    values = tensor.detach().to(torch.float64).numpy()
    if not np.all(np.isfinite(values)):
        raise ValueError("a coefficient is not finite")
    return values.tolist()


# -- the data file ---------------------------------------------------------------------------------------------

class Numbers:
    """The data file a generator writes: its batches by name and one entry per (preset, parameters, batch)."""

    def __init__(self, framework, repository, commit, generator, float32=False, notes=""):
        self.header = {"framework": framework, "repository": repository, "commit": commit,
                       "generator": generator, "float32": float32, "notes": notes,
                       "torch": torch.__version__, "python": platform.python_version()}
        self.batches, self.cases, self.findings, self.updates = {}, [], {}, []

    def batch(self, name, batch):
        self.batches[name] = {key: [list(map(float if key != "mask" else int, r)) if isinstance(r, list) else r
                                    for r in value] for key, value in batch.items()}
        return name

    def add(self, preset, params, batch, coefficient, kept=None, setting="", note="", gradient=None):
        """One case: the coefficients c (and the loss mask left, and for a loss with a term that does not depend
        on A the whole gradient −∂loss/∂log π = c·A + d)."""
        case = {"preset": preset, "setting": setting, "params": params, "batch": batch,
                "coefficients": as_list(coefficient)}
        if kept is not None:
            case["kept"] = torch.as_tensor(kept).to(torch.int64).tolist()
        if gradient is not None:
            case["gradient"] = as_list(gradient)
        if note:
            case["note"] = note
        self.cases.append(case)

    def finding(self, name, batch, coefficient, note):
        """Numbers that are not a preset's, kept for a test that shows what the framework's code does."""
        self.findings[name] = {"batch": batch, "coefficients": as_list(coefficient), "note": note}

    def update(self, preset, setting, config, params, correction, correction_params, batch, loss, gradient,
               float32=False, note=""):
        """One check of an update preset: the framework's configuration as run (``config``), the update preset it
        is, the loss parameters and correction (registry id and parameters) that setting means in toylab's terms,
        and per token of the batch the framework's loss and its gradient ∂loss/∂log π_θ (``per_token``);
        ``float32`` where the loss or its correction exponentiates in float32."""
        entry = {"preset": preset, "setting": setting, "config": config, "params": params, "correction": correction,
                 "correction_params": correction_params, "batch": batch, "loss": loss, "gradient": gradient}
        if float32:
            entry["float32"] = True
        if note:
            entry["note"] = note
        self.updates.append(entry)

    def write(self, path):
        """JSON, one batch or case per line block, floats as Python writes them (they read back bit for bit)."""
        lines = ["{"]
        for key, value in self.header.items():
            lines.append(f"  {json.dumps(key)}: {json.dumps(value)},")
        lines.append('  "batches": {')
        names = list(self.batches)
        for name in names:
            comma = "," if name != names[-1] else ""
            lines.append(f"    {json.dumps(name)}: {json.dumps(self.batches[name])}{comma}")
        lines.append("  },")
        lines.append('  "findings": {')
        names = list(self.findings)
        for name in names:
            comma = "," if name != names[-1] else ""
            lines.append(f"    {json.dumps(name)}: {json.dumps(self.findings[name])}{comma}")
        lines.append("  },")
        lines.append('  "cases": [')
        for i, case in enumerate(self.cases):
            comma = "," if i < len(self.cases) - 1 else ""
            lines.append(f"    {json.dumps(case)}{comma}")
        lines.append("  ]" + ("," if self.updates else ""))
        if self.updates:
            lines.append('  "updates": [')
            for i, entry in enumerate(self.updates):
                comma = "," if i < len(self.updates) - 1 else ""
                lines.append(f"    {json.dumps(entry)}{comma}")
            lines.append("  ]")
        lines.append("}")
        Path(path).write_text("\n".join(lines) + "\n")
        print(f"{path}: {len(self.cases)} cases and {len(self.updates)} update checks on {len(self.batches)} "
              "batches", file=sys.stderr)
