"""The words the page uses for the pipeline's three distributions: the choices' names and help, the identity check
and what it certifies, and what the trainer's scored π does to the objective every bias is measured against."""

from toylab.catalogue.pipelines import PIPELINES

LOGGED_NAMES = {"processed": "processed (= sampled)", "raw": "raw (no τ, no cut)", "temperature": "τ, no cut"}
SCORED_NAMES = {"plain": "softmax(θ)", "temperature": "softmax(θ/τ)", "keep_mask": "keep mask"}
LOGGED_HELP = ("What the engine logs as μ, the denominator of every weight π/μ. processed: the distribution it samples "
               "from, after temperature and top-k/top-p (vLLM's processed_logprobs). raw: softmax of its logits, before "
               "temperature and truncation (vLLM's default raw_logprobs). τ, no cut: the temperature without the "
               "truncation (SGLang's default). The sequences are always drawn from what it samples.")
SCORED_HELP = ("What the trainer's recomputation scores: softmax(θ); softmax(θ/τ), the trainer dividing its logits by "
               "the sampler's temperature; or the keep mask, softmax(θ/τ) over the tokens the sampler kept at the "
               "position (DeepSeek-V3.2's Keep Sampling Mask). The objective J = E_π[r], its gradient and every bias "
               "are those of the scored π.")
PIPELINE_HELP = ("A framework's pipeline, read from its code at a commit (docs/frameworks.md): it sets the two choices "
                 "below; the sampler's τ, top-k and top-p stay yours. Any correction preset combines with it.")
IDENTITY_HELP = ("E_μs[W] = ∏_t Σ_v μ_s(v)·π(v)/μ_log(v), over the tokens the sampler draws: the mean weight. It is 1 "
                 "when the logged μ is the sampled one and the scored π puts all its mass where the sampler draws; "
                 "with logged = sampled it is π's mass on the kept set. It certifies only that the weights average to "
                 "1, not that they correct the draws: raw logging with a plain trainer at mismatch 0 reads exactly 1 "
                 "(every weight is 1) while every estimator is biased, the draws coming from the tempered, truncated "
                 "sampler. Far from 1: the logged μ is not what was sampled, or π has mass out of reach.")


def combination_label(logged, scored):
    """'logged raw · scored softmax(θ/τ)': one pipeline of the pipeline sweep."""
    return f"logged {LOGGED_NAMES[logged]} · scored {SCORED_NAMES[scored]}"


def presets_text(presets):
    """'verl, TRL (vllm_mode=colocate), …': the framework pipelines that use a combination."""
    return ", ".join(PIPELINES[id].label for id in presets)


def describe_pipeline(settings):
    """'verl (vLLM rollout): logged processed, scored softmax(θ/τ)', or the two choices alone."""
    choices = f"logged {LOGGED_NAMES[settings.logged]}, scored {SCORED_NAMES[settings.scored]}"
    return choices if settings.pipeline not in PIPELINES else f"{PIPELINES[settings.pipeline].label}: {choices}"


def identity_metric(diagnostics):
    """(label, short label, value, help) of the identity check for the header."""
    return "E_μs[W] check", "E_μs[W]", f"{diagnostics.identity:.4f}", IDENTITY_HELP


def identity_implied(diagnostics):
    """Whether the identity check says nothing the other numbers do not: E_μs[W] = 1 − π(y ∉ S) to 1e-12, as it is
    whenever the logged μ is the sampled one (then E_μs[W] = Σ_{y ∈ S} π(y)). The one-line header leaves such a
    value to its tooltip."""
    return abs(diagnostics.identity - (1 - diagnostics.unreachable_mass)) <= 1e-12


def objective_metric(diagnostics):
    """(label, short label, value, help) of how far the scored objective moved, or None when the trainer scores
    softmax(θ)."""
    if diagnostics.plain_J is None:
        return None
    return ("objective moved", "∇J moved", f"{diagnostics.objective_shift:.1%}",
            f"‖∇J − ∇J_plain‖/‖∇J_plain‖: the trainer scores another π than softmax(θ), so J = E_π[r] (here "
            f"{diagnostics.J:.4f}, against {diagnostics.plain_J:.4f} for softmax(θ)) and its gradient are those of the "
            "scored π. Every bias here is measured against that gradient: an estimator can be unbiased for what it "
            "optimises while what it optimises moved by this much.")


def objective_caption(settings, diagnostics):
    """Under the estimators table when the trainer scores another π: what the biases are measured against."""
    if diagnostics.plain_J is None:
        return None
    return (f"The trainer scores {SCORED_NAMES[settings.scored]}: J = E_π[r] = {diagnostics.J:.4f} is that π's "
            f"objective (softmax(θ)'s is {diagnostics.plain_J:.4f}), and every rel bias, std and RMSE is against its "
            f"gradient. That gradient is {diagnostics.objective_shift:.1%} of ‖∇J_plain‖ away from softmax(θ)'s: the "
            "column 'vs softmax(θ)' is each estimator's error against the latter, ‖E[ĝ] − ∇J_plain‖/‖∇J_plain‖.")


def identity_caption(settings, diagnostics):
    """Under the estimators table when the logged μ is not the sampled one: the identity check and its limit."""
    if settings.logged == "processed":
        return None
    return (f"The correction divides by the {LOGGED_NAMES[settings.logged]} μ, not the one the sequences were drawn "
            f"from: the weights average E_μs[W] = {diagnostics.identity:.4f}, and sequence IS is not unbiased even "
            "where nothing is out of reach. A value near 1 does not certify the weights: at mismatch 0, raw logging "
            "with a plain trainer reads 1 exactly while every estimator is biased.")


PIPELINE_SWEEP_ABOUT = ("One panel per pipeline the frameworks use (hover a line for them): the relative bias of each "
                        "estimator, against the gradient of that pipeline's scored objective. Below, each pipeline's "
                        "identity check E_μs[W]: 1 when the logged μ is the sampled one and π's mass is where the "
                        "sampler draws — a necessary condition, not a sufficient one (raw logging reads 1 at τ = 1 "
                        "without truncation, as it should, and also where its weights are all 1 yet the draws are "
                        "tempered).")


SIGNATURE_ADVICE = {   # where the matched toy's pipeline is set: the page's sidebar, or inspect's options
    "page": {"raw": "Set the sidebar's logged μ to raw (or your framework's pipeline) and its temperature",
             "truncated": "The sidebar's top-k/top-p with your framework's pipeline match that"},
    "cli": {"raw": "Run inspect with --logged raw and --temperature (or your framework's --pipeline)",
            "truncated": "Run inspect with --top-k/--top-p and your framework's --pipeline to match that"},
}


def signature_text(signature, where="page"):
    """The sentences on what the log's ratios say about its logged μ (``your_run.signature``), with the advice for
    ``where`` they are shown (SIGNATURE_ADVICE: "page" or "cli")."""
    advice = SIGNATURE_ADVICE[where]
    evidence = (f"the mean ratio π/μ over its tokens is {signature.mean_ratio:.4f}"
                + ("" if signature.se is None else f" ± {signature.se:.2g}") + (
                    "" if signature.distance is None else f", {abs(signature.distance):.0f} standard errors from 1"))
    return {
        "raw": f"These log-probabilities look pre-temperature (raw): {evidence}, above 1 as raw logging with a "
               "trainer that divides by a temperature ≠ 1 makes it while the logit error is small (E_μs[ρ] = 1 + "
               "χ²(π_τ‖μ_raw) with none), while log-probabilities of the distribution sampled from give exactly 1 at any "
               f"mismatch. {advice['raw']}: the matched toy then matches the pipeline.",
        "truncated": f"These log-probabilities look truncated while the trainer's π is not: {evidence}, below 1 as "
                     "processed log-probabilities with top-k/top-p and a trainer without the sampling mask make it (the "
                     "kept mass; raw ones at a temperature below 1 can too, under a larger logit error), while the "
                     f"distribution sampled from gives exactly 1. {advice['truncated']}.",
        "consistent": f"The identity check passes: {evidence}, as log-probabilities of the distribution sampled from "
                      "give. It is necessary, not sufficient: raw log-probabilities read 1 too at temperature 1, or "
                      "with no logit error and a plain trainer.",
        "unknown": f"No identity check: {evidence} and one sequence has no standard error.",
    }[signature.verdict]


def scored_objective_note(settings):
    """For the Training tab: with a trainer that scores another π, J and its gradient are that π's."""
    if settings.scored == "plain":
        return ""
    return (f"The trainer scores {SCORED_NAMES[settings.scored]}: J, ∇J and every cosine are those of that π's "
            "objective, and on_policy samples from it. ")
