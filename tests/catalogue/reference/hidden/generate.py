"""Reference numbers for routing replay and version handling, from the frameworks' own code, run on toy inputs;
writes numbers.json beside this file.

Routing. Megatron-LM's ``topk_routing_with_score_function`` (the router of every Megatron-based trainer: top-k of
the router's logits, then a softmax over the picked) at NVIDIA/Megatron-LM d98e8a6, with the replay hooks it takes:
verl's ``RouterReplay.get_replay_topk`` (1dda039) and slime's ``get_routing_replay_compute_topk`` (624b824, reached
through Megatron's ``router_replay`` argument, as slime's patched Megatron calls it). Stubbed: Transformer Engine
(absent: HAVE_TE False, no fused path), Megatron's batch-invariant mode (off), its grouped top-k (not used), verl's
RouterReplay registry (the object holds only the fields ``get_replay_topk`` reads) and slime's ROUTING_REPLAY
(a list of recorded indices). Each case: router logits (rows: a layer and position each; columns: experts), the
indices replayed (the engine's routing), and the routing probabilities and map the code returns natively, under
verl's RECORD and REPLAY_FORWARD, and under slime's record, replay_forward and replay_backward stages.

Versions. slime's masking of a recycled partial rollout (generate_and_rm's three lines) and the loss mask
``Sample.append_response_tokens`` extends when the continuation is generated; AReaL's
``compute_prox_logp_approximations`` (cbff54d) on one-token rows at each version lag, with the loss of
``ppo_actor_loss_fn`` (copied verbatim in ../areal/generate.py) at that π_prox, per token, with and without AReaL's
token-mask rejection sampling at 5 (its example), its gradient by autograd (logprobs detached into the
approximation, as grpo_loss_fn passes them).

    python tests/catalogue/reference/hidden/generate.py
"""

import importlib.util
import json
import os
import platform
import sys
from enum import Enum
from pathlib import Path
from typing import Optional, Tuple

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

# -- stubs for what the copied code imports: Transformer Engine absent, no batch-invariant mode -------------------
HAVE_TE = False
fused_topk_with_score_function = None


def is_te_min_version(version):
    return False


def is_batch_invariant_mode_enabled():
    return False


def group_limited_topk(**kwargs):
    raise NotImplementedError("grouped top-k is not used here")


# verbatim: NVIDIA/Megatron-LM d98e8a64ddf34856e74b24714e3bedb2f5a39553 megatron/core/transformer/moe/moe_utils.py 766-957
def topk_routing_with_score_function(
    logits: torch.Tensor,
    topk: int,
    use_pre_softmax: bool = False,
    num_groups: Optional[int] = None,
    group_topk: Optional[int] = None,
    scaling_factor: Optional[float] = None,
    score_function: str = "softmax",
    expert_bias: Optional[torch.Tensor] = None,
    fused: bool = False,
    router_replay: Optional['RouterReplay'] = None,
    dense_output: bool = False,
    precomputed_indices: Optional[torch.Tensor] = None,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """Compute the routing probabilities and map for top-k selection with score function.

    Args:
        logits (torch.Tensor): Logits tensor.
        topk (int): The number of experts to select for each token.
        use_pre_softmax (bool, optional): Whether to apply softmax or sigmoid before top-k
                                          selection. Defaults to False.
        num_groups (int, optional): Number of groups for routed experts. Defaults to None.
        group_topk (int, optional): Number of selected groups for each token. Defaults to None.
        scaling_factor (float, optional): Scaling factor of routing score in top-k selection.
                                         Defaults to None.
        score_function (str, optional): The score function to use. Can be "softmax", "sigmoid"
                                        or "sqrtsoftplus". Defaults to "softmax".
        expert_bias (torch.Tensor, optional): The bias added to logits for expert routing.
                                              Defaults to None.
        fused (bool, optional): Whether to use the fused version. Defaults to False.
        router_replay (Optional['RouterReplay']): For debugging and development, allows for
                                             deterministic routing by replaying a previously
                                             recorded routing sequence.

                                              Defaults to None.
        dense_output (bool, optional): If True, return dense tensors [num_tokens, topk] instead of
                                       sparse tensors [num_tokens, num_experts]. Defaults to False.
        precomputed_indices (torch.Tensor, optional): Top-k indices [num_tokens, topk]
                                       selected by the caller. When given, the score function's
                                       own top-k is bypassed and probs are computed at these
                                       indices (e.g. for quantile balancing). Defaults to None.

    Returns:
        Tuple[torch.Tensor, torch.Tensor]:
            When dense_output=False (default):
                - routing_probs (torch.Tensor): Shape [num_tokens, num_experts]. Sparse tensor
                  containing the normalized routing probability for each token-expert pair. Non-zero
                  entries correspond to the top-k selected experts per token.
                - routing_map (torch.Tensor): Shape [num_tokens, num_experts]. Boolean mask where
                  True indicates the token is routed to that expert (i.e. the expert was in the
                  token's top-k selection).
            When dense_output=True:
                - probs (torch.Tensor): Shape [num_tokens, topk]. The normalized routing
                  probabilities for each token's top-k selected experts.
                - top_indices (torch.Tensor): Shape [num_tokens, topk]. The expert indices
                  selected for each token.
    """
    assert logits.dim() == 2, f"Expected 2D logits [num_tokens, num_experts], got {logits.dim()}."
    num_tokens, num_experts = logits.shape
    assert not (
        fused and precomputed_indices is not None
    ), "precomputed_indices is not supported with the fused top-k score function."
    if fused:
        if not HAVE_TE or fused_topk_with_score_function is None:
            raise ValueError(
                "fused_topk_with_score_function is not available. Please install TE >= 2.6.0."
            )
        if score_function == "sqrtsoftplus" and not is_te_min_version("2.13.0"):
            raise ValueError(
                "Fused sqrtsoftplus score function requires TE >= 2.13.0. "
                "Please upgrade Transformer Engine or disable moe_router_fusion."
            )
        return fused_topk_with_score_function(
            logits=logits,
            topk=topk,
            use_pre_softmax=use_pre_softmax,
            num_groups=num_groups,
            group_topk=group_topk,
            scaling_factor=scaling_factor,
            score_function=score_function,
            expert_bias=expert_bias,
        )

    def _compute_topk(
        scores: torch.Tensor,
        topk: int,
        num_groups: Optional[int] = None,
        group_topk: Optional[int] = None,
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        """Compute the top-k indices for the given scores.

        Args:
            scores (torch.Tensor): The scores tensor.
            topk (int): The number of top-k indices to compute.
            num_groups (int, optional): The number of groups to compute the top-k indices for.
                                        Defaults to None.
            group_topk (int, optional): The number of top-k indices to compute for each group.
                                        Defaults to None.

        Returns:
            Tuple[torch.Tensor, torch.Tensor]: The top-k indices and the top-k scores.
        """
        if group_topk:
            return group_limited_topk(
                scores=scores,
                topk=topk,
                num_tokens=num_tokens,
                num_experts=num_experts,
                num_groups=num_groups,
                group_topk=group_topk,
            )
        else:
            # Sorting top-k turned off during inference
            return torch.topk(
                scores,
                k=topk,
                dim=1,
                sorted=torch.is_grad_enabled() or is_batch_invariant_mode_enabled(),
            )

    def compute_topk(scores, topk, num_groups=None, group_topk=None):
        # Default behavior if no replay is active

        if router_replay is None:
            return _compute_topk(scores, topk, num_groups=num_groups, group_topk=group_topk)
        else:
            return router_replay.get_replay_topk(
                scores, topk, num_groups, group_topk, _compute_topk
            )

    # Precision notes:
    # - Logits are converted to fp32 for score functions.
    # - All the intermediate calculations are in fp32.
    # - The final probs are casted to the same dtype as the logits.
    if score_function == "softmax":
        if use_pre_softmax:
            scores = torch.softmax(logits, dim=-1, dtype=torch.float32)
            if precomputed_indices is not None:
                top_indices = precomputed_indices
                probs = torch.gather(scores, dim=1, index=top_indices)
            else:
                probs, top_indices = compute_topk(scores, topk, num_groups, group_topk)
        else:
            if precomputed_indices is not None:
                top_indices = precomputed_indices
                scores = torch.gather(logits, dim=1, index=top_indices)
            else:
                scores, top_indices = compute_topk(logits, topk, num_groups, group_topk)
            probs = torch.softmax(scores, dim=-1, dtype=torch.float32)
    elif score_function in ("sigmoid", "sqrtsoftplus"):
        if score_function == "sigmoid":
            scores = torch.sigmoid(logits.float())
        else:
            scores = torch.nn.functional.softplus(logits.float()).sqrt()
        if precomputed_indices is not None:
            top_indices = precomputed_indices
            scores = torch.gather(scores, dim=1, index=top_indices)
        elif expert_bias is not None:
            scores_for_routing = scores + expert_bias.float()
            _, top_indices = compute_topk(scores_for_routing, topk, num_groups, group_topk)
            scores = torch.gather(scores, dim=1, index=top_indices)
        else:
            scores, top_indices = compute_topk(scores, topk, num_groups, group_topk)
        probs = scores / (scores.sum(dim=-1, keepdim=True) + 1e-20) if topk > 1 else scores
    else:
        raise ValueError(f"Invalid score_function: {score_function}")

    if scaling_factor:
        probs = probs * scaling_factor

    probs = probs.type_as(logits)

    if dense_output:
        return probs, top_indices

    if torch.are_deterministic_algorithms_enabled():
        # build [num_tokens, num_experts] from [num_tokens, topk]
        routing_probs = torch.zeros_like(logits)
        rows = torch.arange(num_tokens, device=logits.device).unsqueeze(1)
        routing_probs.index_put_((rows, top_indices), probs, accumulate=False)

        routing_map = torch.zeros_like(logits, dtype=logits.dtype)
        routing_map.index_put_(
            (rows, top_indices), torch.ones_like(probs, dtype=routing_map.dtype), accumulate=False
        )
        routing_map = routing_map.bool()
    else:
        # TODO Try using element-wise operations instead of scatter?
        routing_probs = torch.zeros_like(logits).scatter(1, top_indices, probs)
        routing_map = torch.zeros_like(logits).int().scatter(1, top_indices, 1).bool()

    return routing_probs, routing_map
# end verbatim


# verbatim: volcengine/verl 1dda039b9c6311889a9c9a26040677e1254814f9 verl/utils/megatron/router_replay_patch.py 38-41
class RouterReplayAction(Enum):
    RECORD = "record"
    REPLAY_FORWARD = "replay_forward"
    REPLAY_BACKWARD = "replay_backward"
# end verbatim


class RouterReplay:
    """verl's RouterReplay reduced to the fields get_replay_topk reads (its registry and file I/O stubbed)."""

    def __init__(self, action, target=None):
        self.router_replay_action = action
        self.target_topk_idx = target
        self.target_replay_mask = None
        self.replay_backward_list = [] if target is None else [target]
        self.replay_backward_mask_list = [] if target is None else [None]
        self.recorded_topk_idx = None

    def record_indices(self, topk_indices):
        self.recorded_topk_idx = topk_indices

# verbatim: volcengine/verl 1dda039b9c6311889a9c9a26040677e1254814f9 verl/utils/megatron/router_replay_patch.py 109-136
    def get_replay_topk(self, scores, topk, num_groups=None, group_topk=None, default_compute_topk=None):
        """Select native or replayed experts using the current replay action."""
        action = self.router_replay_action
        if action == RouterReplayAction.RECORD:
            probs, indices = default_compute_topk(scores, topk, num_groups=num_groups, group_topk=group_topk)
            self.record_indices(indices)
            return probs, indices

        if action == RouterReplayAction.REPLAY_FORWARD and self.target_topk_idx is not None:
            indices = self.target_topk_idx
            replay_mask = self.target_replay_mask
        elif action == RouterReplayAction.REPLAY_BACKWARD and self.replay_backward_list:
            indices = self.replay_backward_list.pop(0)
            replay_mask = self.replay_backward_mask_list.pop(0)
        else:
            return default_compute_topk(scores, topk, num_groups=num_groups, group_topk=group_topk)

        indices = indices.to(scores.device)
        if replay_mask is not None:
            _, native_indices = default_compute_topk(scores, topk, num_groups=num_groups, group_topk=group_topk)
            if indices.shape != native_indices.shape or replay_mask.numel() != scores.shape[0]:
                raise RuntimeError(
                    "Router replay tensors are not aligned: "
                    f"scores={tuple(scores.shape)}, targets={tuple(indices.shape)}, "
                    f"native={tuple(native_indices.shape)}, mask={tuple(replay_mask.shape)}"
                )
            indices = torch.where(replay_mask.to(scores.device).bool().unsqueeze(-1), indices, native_indices)
        return scores.gather(1, indices), indices
# end verbatim


ORDERED_TOPK_CAPTURE_ROUTER = None          # slime's DeepEP bridge: not registered here


class SlimeRecords:
    """slime's RoutingReplay reduced to its list of recorded indices."""

    def __init__(self, recorded=None):
        self.top_indices_list = [] if recorded is None else [recorded]

    def record(self, top_indices):
        self.top_indices_list.append(top_indices)

    def pop_forward(self):
        return self.top_indices_list[0]

    def pop_backward(self):
        return self.top_indices_list[0]


ROUTING_REPLAY = None


# verbatim: THUDM/slime 624b824a898ab0ec1fcb4d373004c7f3852bf515 slime/utils/routing_replay.py 21-25
def _capture_ordered_topk(top_indices):
    """Keep the current router's exact top-k order until its MoE combine."""
    router = ORDERED_TOPK_CAPTURE_ROUTER
    if router is not None:
        router._slime_ordered_topk_indices = top_indices
# end verbatim


# verbatim: THUDM/slime 624b824a898ab0ec1fcb4d373004c7f3852bf515 slime/utils/routing_replay.py 52-78
def _compute_topk_for_current_router(
    old_compute_topk,
    scores,
    topk,
    num_groups=None,
    group_topk=None,
):
    # SGLang's deterministic DeepSeek/GLM biased top-k uses
    # torch.topk(..., sorted=False).  Megatron's local compute_topk uses the
    # default sorted=True.  The selected expert set is the same, but the
    # low-latency-compatible owner reduction consumes experts in top-k column
    # order, so the difference changes BF16 accumulation before any route
    # actually diverges.
    #
    # Only override routers registered by the DeepEP alignment bridge, and only for the
    # non-grouped Megatron path used by GLM-5 (n_group=topk_group=1 in SGLang,
    # represented as no group limit in Megatron).  Other training paths retain
    # Megatron's original semantics.
    if ORDERED_TOPK_CAPTURE_ROUTER is not None and not group_topk:
        return torch.topk(scores, k=topk, dim=1, sorted=False)

    return old_compute_topk(
        scores,
        topk,
        num_groups=num_groups,
        group_topk=group_topk,
    )
# end verbatim


# verbatim: THUDM/slime 624b824a898ab0ec1fcb4d373004c7f3852bf515 slime/utils/routing_replay.py 171-216
def get_routing_replay_compute_topk(old_compute_topk):
    def compute_topk(scores, topk, num_groups=None, group_topk=None):
        if os.environ.get("ENABLE_ROUTING_REPLAY", "0") == "1":
            routing_replay_stage = os.environ["ROUTING_REPLAY_STAGE"]
            if routing_replay_stage == "fallthrough":
                probs, top_indices = _compute_topk_for_current_router(
                    old_compute_topk,
                    scores,
                    topk,
                    num_groups=num_groups,
                    group_topk=group_topk,
                )
            elif routing_replay_stage == "record":
                probs, top_indices = _compute_topk_for_current_router(
                    old_compute_topk,
                    scores,
                    topk,
                    num_groups=num_groups,
                    group_topk=group_topk,
                )
                ROUTING_REPLAY.record(top_indices)
            elif routing_replay_stage == "replay_forward":
                top_indices = ROUTING_REPLAY.pop_forward()
                assert (
                    top_indices.shape[0] == scores.shape[0] and top_indices.shape[1] == topk
                ), f"[{torch.distributed.get_rank()}] top_indices shape {top_indices.shape} does not match scores shape {scores.shape} and topk {topk}"
                probs = scores.gather(1, top_indices)
            elif routing_replay_stage == "replay_backward":
                top_indices = ROUTING_REPLAY.pop_backward()
                assert (
                    top_indices.shape[0] == scores.shape[0] and top_indices.shape[1] == topk
                ), f"top_indices shape {top_indices.shape} does not match scores shape {scores.shape} and topk {topk}"
                probs = scores.gather(1, top_indices)
        else:
            probs, top_indices = _compute_topk_for_current_router(
                old_compute_topk,
                scores,
                topk,
                num_groups=num_groups,
                group_topk=group_topk,
            )

        _capture_ordered_topk(top_indices)
        return probs, top_indices

    return compute_topk
# end verbatim


class SlimeHook:
    """How slime's compute_topk replaces Megatron's: through the router_replay argument, with Megatron's own top-k as
    the old one."""

    def get_replay_topk(self, scores, topk, num_groups, group_topk, default_compute_topk):
        return get_routing_replay_compute_topk(default_compute_topk)(scores, topk, num_groups, group_topk)


def mask_recycled(args, sample):
# verbatim: THUDM/slime 624b824a898ab0ec1fcb4d373004c7f3852bf515 slime/rollout/sglang_rollout.py 231-233
    # mask previous off-policy generation for partial rollout
    if args.partial_rollout and args.mask_offpolicy_in_partial_rollout and sample.response_length > 0:
        sample.loss_mask = [0] * sample.response_length
# end verbatim
    return sample


class Sample:
    """slime's Sample reduced to the fields append_response_tokens reads when tokens are appended."""

    def __init__(self):
        self.tokens, self.response_length, self.loss_mask = [], 0, None

    def append(self, tokens, trainable=True):
# verbatim: THUDM/slime 624b824a898ab0ec1fcb4d373004c7f3852bf515 slime/utils/types.py 286-292
        previous_response_length = self.response_length
        if tokens:
            self.tokens += tokens
            self.response_length += len(tokens)
            if self.loss_mask is None:
                self.loss_mask = [1] * previous_response_length
            self.loss_mask += [1 if trainable else 0] * len(tokens)
# end verbatim


# verbatim: areal-project/AReaL cbff54d645d2cd8ee1f1c358a82f3f473588433d areal/utils/constants.py 58-69
class ProxApproxMethod(str, Enum):
    """Approximation method for proximal policy log-probabilities.

    Attributes:
        LOGLINEAR: Log-linear interpolation in log-space (geometric mean in prob space).
        LINEAR: Linear interpolation in probability space (arithmetic mean).
        ROLLOUT: Use behavior policy from rollout as-is (no approximation).
    """

    LOGLINEAR = "loglinear"
    LINEAR = "linear"
    ROLLOUT = "rollout"
# end verbatim


# verbatim: areal-project/AReaL cbff54d645d2cd8ee1f1c358a82f3f473588433d areal/utils/constants.py 86-92
# Approximation method names used in compute_prox_logp_approximations()
PROX_APPROX_METHOD_LOGLINEAR = ProxApproxMethod.LOGLINEAR.value
PROX_APPROX_METHOD_LINEAR = ProxApproxMethod.LINEAR.value
PROX_APPROX_METHOD_ROLLOUT = ProxApproxMethod.ROLLOUT.value

# List of all approximation methods computed for metrics comparison
PROX_APPROX_METHODS_ALL = [m.value for m in ProxApproxMethod]
# end verbatim


# verbatim: areal-project/AReaL cbff54d645d2cd8ee1f1c358a82f3f473588433d areal/trainer/ppo/actor.py 768-848
def compute_prox_logp_approximations(
    old_logp: torch.Tensor,
    logprobs: torch.Tensor,
    versions: torch.Tensor,
    current_version: int,
    method: str | None = None,
) -> dict[str, torch.Tensor]:
    """
    Compute approximation(s) for proximal policy log-probabilities.

    This function approximates the log-probabilities of the proximal policy (one training step
    behind the current policy) using version-aware interpolation between the behavior policy
    (old_logp) and current policy (logprobs). This avoids the need for an expensive forward pass
    to compute the proximal policy's log-probabilities explicitly.

    Args:
        old_logp: log_p_behave from the rollout (behavior policy)
        logprobs: log_p_theta from current training forward pass
        versions: per-token policy versions from rollout (v_behave for each token)
        current_version: current training step version (v_theta)
        method: If specified, only compute this method. If None, compute all methods.

    Returns:
        Dictionary with approximation results. Single key if method specified, all methods otherwise.
    """
    # Assume proximal version is current_version - 1 (last broadcast)
    # In AReaL, proximal policy is the last updated/broadcast policy version
    v_proximal = current_version - 1

    # Extract version information
    v_behave = versions.float()
    v_theta = float(current_version)

    # CRITICAL: Only approximate generated tokens (version >= 0)
    # Prompt tokens (version < 0) must NOT be approximated - they have no generation version
    generated_tokens_mask = versions >= 0

    # Compute interpolation factor alpha
    # When v_behave == v_proximal: alpha=0 (use old_logp)
    # When v_behave == v_theta: alpha=1 (use logprobs)
    # For prompt tokens (version < 0): alpha=0 (no interpolation)
    version_diff = v_theta - v_behave
    version_gap = v_proximal - v_behave
    # Avoid division by zero AND exclude prompt tokens
    alpha = torch.where(
        (version_diff > 0) & generated_tokens_mask,
        version_gap / version_diff,
        torch.zeros_like(v_behave),
    )
    alpha = torch.clamp(alpha, 0.0, 1.0)

    approximations = {}

    # If method is specified, only compute that one
    # Otherwise compute all methods (for metrics comparison)
    methods_to_compute = [method] if method else PROX_APPROX_METHODS_ALL

    for m in methods_to_compute:
        if m == PROX_APPROX_METHOD_LOGLINEAR:
            # Method 1: Log-linear interpolation in log-space (geometric mean in probability space)
            # log(p_prox) = (1-α)·log(p_behave) + α·log(p_theta)
            approximations[PROX_APPROX_METHOD_LOGLINEAR] = old_logp + alpha * (
                logprobs - old_logp
            )

        elif m == PROX_APPROX_METHOD_LINEAR:
            # Method 2: Linear interpolation in probability space (arithmetic mean)
            # p_prox = (1-α)·p_behave + α·p_theta
            # Then convert back to log space: log(p_prox)
            p_behave = torch.exp(old_logp)
            p_theta = torch.exp(logprobs)
            p_arithmetic = (1 - alpha) * p_behave + alpha * p_theta
            approximations[PROX_APPROX_METHOD_LINEAR] = torch.log(p_arithmetic + 1e-10)

        elif m == PROX_APPROX_METHOD_ROLLOUT:
            # Method 3: Use behavior policy from rollout as-is (no approximation)
            # p_prox = p_behave
            # Used for metrics comparison
            approximations[PROX_APPROX_METHOD_ROLLOUT] = old_logp.clone()

    return approximations
# end verbatim


# -- the cases ----------------------------------------------------------------------------------------------------

def routing_cases():
    """Router logits (rows × experts, float64) and the engine's routing (its top-k under an error), through Megatron's
    router natively, under verl's record and replays, and under slime's stages."""
    global ROUTING_REPLAY
    rng = np.random.default_rng(46)
    cases = []
    for rows, experts, k in ((12, 4, 2), (8, 3, 1), (10, 6, 3), (6, 8, 2)):
        logits = rng.standard_normal((rows, experts))
        replayed = np.argsort(-(logits + 0.8 * rng.standard_normal((rows, experts))), axis=1, kind="stable")[:, :k]
        scores, indices = torch.tensor(logits), torch.tensor(replayed)
        runs = {"native": topk_routing_with_score_function(scores, k)}
        recorder = RouterReplay(RouterReplayAction.RECORD)
        runs["verl_record"] = topk_routing_with_score_function(scores, k, router_replay=recorder)
        for name, action in (("verl_replay_forward", RouterReplayAction.REPLAY_FORWARD),
                             ("verl_replay_backward", RouterReplayAction.REPLAY_BACKWARD)):
            runs[name] = topk_routing_with_score_function(scores, k, router_replay=RouterReplay(action, indices))
        os.environ["ENABLE_ROUTING_REPLAY"] = "1"
        for stage in ("record", "replay_forward", "replay_backward"):
            os.environ["ROUTING_REPLAY_STAGE"] = stage
            ROUTING_REPLAY = SlimeRecords(None if stage == "record" else indices)
            runs[f"slime_{stage}"] = topk_routing_with_score_function(scores, k, router_replay=SlimeHook())
        cases.append({"logits": logits.tolist(), "top_k": k, "replayed": replayed.tolist(),
                      "verl_recorded": recorder.recorded_topk_idx.tolist(),
                      "runs": {name: {"probs": probs.tolist(), "map": chosen.tolist()}
                               for name, (probs, chosen) in runs.items()}})
    return cases


def mask_cases():
    """The loss mask of a recycled sample: c tokens from the earlier rollout, T − c generated after, with and without
    --mask-offpolicy-in-partial-rollout."""
    cases = []
    for T in (3, 4, 6):
        for c in range(1, T):
            for masked in (True, False):
                sample = Sample()
                sample.append(list(range(c)))                    # the earlier rollout's tokens (trainable then)
                args = type("Args", (), {"partial_rollout": True, "mask_offpolicy_in_partial_rollout": masked})()
                mask_recycled(args, sample)
                sample.append(list(range(c, T)))                 # the continuation under the newer weights
                cases.append({"T": T, "switch": c, "masked": masked, "loss_mask": list(sample.loss_mask)})
    return cases


def areal_module():
    spec = importlib.util.spec_from_file_location("areal_generate", HERE.parent / "areal" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def loglinear_cases():
    """One-token rows: log π_θ, log μ, the token's version and the trainer's; AReaL's log-linear π_prox and the
    per-token loss and gradient of ppo_actor_loss_fn at it (ε 0.2), without and with token-mask rejection at 5."""
    areal = areal_module()
    rows = []
    pairs = [(-0.3, -0.9), (-1.2, -0.4), (-0.05, -0.05), (-2.5, -0.2), (-0.2, -2.7), (-0.7, -0.72), (-4.0, -0.01)]
    for current in (5, 9):                                  # every version ≥ 0 (AReaL: < 0 marks prompt tokens)
        for lag in range(0, 5):
            for log_pi, log_mu in pairs:
                for advantage in (0.9, -0.6):
                    rows.append((log_pi, log_mu, current - lag, current, advantage))
    cases = []
    for rejection in (None, {"level": "token", "action": "mask", "metric": "ratio", "upper": 5.0}):
        config = None if rejection is None else areal.RejectionSamplingConfig(**rejection)
        for log_pi, log_mu, version, current, advantage in rows:
            logprobs = torch.tensor([[log_pi]], dtype=torch.float64, requires_grad=True)
            old = torch.tensor([[log_mu]], dtype=torch.float64)
            prox = compute_prox_logp_approximations(old_logp=old, logprobs=logprobs.detach(),
                                                    versions=torch.tensor([[version]]), current_version=current,
                                                    method=PROX_APPROX_METHOD_LOGLINEAR)[PROX_APPROX_METHOD_LOGLINEAR]
            loss, _ = areal.ppo_actor_loss_fn(logprobs=logprobs, proximal_logprobs=prox, old_logprobs=old,
                                              advantages=torch.tensor([[advantage]], dtype=torch.float64),
                                              eps_clip=0.2, loss_mask=torch.tensor([[True]]),
                                              rejection_sampling=config)
            loss.backward()
            cases.append({"trainer": log_pi, "sampler": log_mu, "version": version, "current_version": current,
                          "advantage": advantage, "rejection": rejection, "prox": float(prox[0, 0]),
                          "loss": float(loss.detach()), "gradient": float(logprobs.grad[0, 0])})
    return cases


def main():
    numbers = {"generator": "tests/catalogue/reference/hidden/generate.py", "torch": torch.__version__,
               "python": platform.python_version(), "routing": routing_cases(), "masks": mask_cases(),
               "loglinear": loglinear_cases()}
    (HERE / "numbers.json").write_text(json.dumps(numbers, indent=1) + "\n")


if __name__ == "__main__":
    main()
