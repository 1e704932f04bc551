"""The KL view: each KL setting's estimate of ∇KL(π‖π_ref) on the engine's tokens, against the true gradient.

For every setting (``catalogue.kl_settings``: a framework's preset or ESTIMATOR.PLACEMENT[.MODIFIER…]) at the
toy's θ, π_ref a distance away (``engine.reference``), one update at the recomputed anchor: its exact mean and
spread (``engine.kl_moments``, per unit β) read as the Estimators tab reads ∇J's,

    cosine, rel bias       of E ĝ against ∇KL(π‖π_ref), the gradient of the KL every framework names
    reverse                the same against ∇KL(π_ref‖π) (what k3 in the loss follows on policy)
    rel std, rel RMSE      √(Var ĝ/N)/‖∇KL‖ and √(‖bias‖² + Var ĝ/N)/‖∇KL‖ at batch size N
    on policy              the rel bias with the sampler equal to the trainer (μ := π): an identity's 0, or the
                           estimator's own bias; the difference from the rel bias is what the engine's μ adds

and, given β, what the setting's error is worth in the penalised update, which ascends J − β·KL(π‖π_ref) with the
exact ∇J and −β·ĝ (the KL estimate its only error), against G = ∇J − β·∇KL:

    penalised rel bias     β·‖E ĝ − ∇KL‖/‖G‖
    penalised rel std      β·√(Var ĝ/N)/‖G‖
"""

import numpy as np

from toylab.catalogue import kl_settings
from toylab.engine.kl_moments import UNDEFINED_BELOW, Tables, kl_moments
from toylab.engine.reference import Reference, kl_from_reference, kl_to_reference


def reference_summary(toy, reference):
    """KL(π‖π_ref), KL(π_ref‖π) (None when infinite) and ‖∇KL(π‖π_ref)‖ at the toy's θ."""
    log_ref = reference.log_probabilities(toy.theta, toy.seed, toy.sampler)
    reverse = float(kl_from_reference(toy.log_pi, log_ref))
    moments = kl_moments(kl_settings.parse("full.loss")[0], Tables.of(toy, log_ref))
    return {"distance": reference.distance, "kl_forward": float(kl_to_reference(toy.log_pi, log_ref)),
            "kl_reverse": reverse if np.isfinite(reverse) else None, "grad_norm": moments.scale}


VIEW_REFERENCE = Reference(1.0)        # the view's default π_ref: at the toy's θ_0 every ∇KL would be 0


def kl_table(toy, settings=kl_settings.VIEW_SETTINGS, reference=VIEW_REFERENCE, N=64, beta=None):
    """One row per setting name: its label, placement, ratio or correction, the cosines and relative errors above
    (None where undefined: ∇KL = 0, π at its reference, or a zero mean), in the order given; with ``beta``, the
    penalised rel bias and rel std too (None where G = 0)."""
    log_ref = reference.log_probabilities(toy.theta, toy.seed, toy.sampler)
    engine, on_policy = Tables.of(toy, log_ref), Tables.of(toy, log_ref, on_policy=True)
    penalised = None if beta is None else np.linalg.norm(toy.true_grad - beta * kl_moments(
        kl_settings.parse("full.loss")[0], engine).forward)
    rows = []
    for name in settings:
        penalty, correction = kl_settings.parse(name)
        moments = kl_moments(penalty, engine, correction)
        ideal = kl_moments(penalty, on_policy, correction)
        rows.append({"setting": name, "label": kl_settings.label(name), "estimator": penalty.estimator,
                     "placement": penalty.placement if penalty.placement == "loss" else f"reward ({penalty.reward_sum})",
                     "weight": penalty.ratio if penalty.placement == "loss" else correction,
                     "cosine": moments.cosine(), "rel_bias": moments.rel_bias(),
                     "reverse_cosine": moments.cosine("reverse"), "reverse_rel_bias": moments.rel_bias("reverse"),
                     "rel_std": moments.rel_std(N), "rel_rmse": moments.rel_rmse(N),
                     "on_policy_rel_bias": ideal.rel_bias(), "on_policy_cosine": ideal.cosine()})
        if beta is not None:
            defined = penalised >= UNDEFINED_BELOW
            rows[-1] |= {"penalised_rel_bias": beta * float(np.linalg.norm(moments.mean - moments.forward)) / penalised
                         if defined else None,
                         "penalised_rel_std": beta * float(np.sqrt(moments.var / N)) / penalised if defined else None}
    return rows
