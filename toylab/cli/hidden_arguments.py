"""The command line's options for hidden variables: a mixture of experts with routing replay, and version switches.

    --replay off|R2|R3|PRESET      train the toy's mixture of experts, replaying as set (a preset of
                                   ``catalogue.replay.REPLAY_PRESETS`` sets the mode: --replay verl:R3)
    --moe-layers L --moe-experts E --moe-top-k k --router-error σ --router-draws D --router-draw sequence|token
    --expert-spread κ               the mixture (``engine.experts.Experts``); only with --replay
    --switch off|fixed|drawn --switch-at c --stamp token|head|tail --mask-stale --prox recompute|loglinear
    --versions PRESET               version switches (``engine.versions.Versions``; a preset of
                                   ``catalogue.version_handling.VERSION_PRESETS`` sets the stamp, the mask and π_prox)

Every bad value is a one-line error before any work (the parser's ``error``).
"""

from toylab.catalogue.replay import REPLAY_PRESETS, REPLAYS
from toylab.catalogue.version_handling import VERSION_PRESETS
from toylab.cli.arguments import number_in, one_of
from toylab.engine.experts import DEFAULT_EXPERTS, DRAWS, LIMITS, ROUTER_ERROR_RANGE, SPREAD_RANGE, Experts
from toylab.engine.versions import PROXIES, STAMPS, SWITCHES, Versions

MOE_OPTIONS = {"moe_layers": "layers", "moe_experts": "experts", "moe_top_k": "top_k", "router_error": "router_error",
               "router_draws": "draws", "router_draw": "draw", "expert_spread": "spread"}


def add_experts_arguments(parser, replay=True):
    """--replay (unless ``replay`` is False: a command that shows every mode) and the mixture's shape (see the module
    docstring)."""
    group = parser.add_argument_group("a mixture of experts: routing mismatch and replay")
    if replay:
        group.add_argument("--replay", type=one_of((*REPLAYS, *REPLAY_PRESETS)), default=None,
                           help="train the toy's mixture of experts, the trainer replaying as set: off (its own "
                                "routing), R2 (the anchor's), R3 (the engine's), or a framework's preset (" +
                                ", ".join(REPLAY_PRESETS) + ") (default: none, the toy without experts)")
    group.add_argument("--moe-layers", type=number_in(int, *LIMITS["layers"]), default=None,
                       help=f"layers L (default {DEFAULT_EXPERTS.layers})")
    group.add_argument("--moe-experts", type=number_in(int, *LIMITS["experts"]), default=None,
                       help=f"experts E (default {DEFAULT_EXPERTS.experts})")
    group.add_argument("--moe-top-k", type=number_in(int, 1, LIMITS["experts"][1] - 1), default=None,
                       help=f"experts picked per token and layer, below E (default {DEFAULT_EXPERTS.top_k})")
    group.add_argument("--router-error", type=number_in(float, *ROUTER_ERROR_RANGE), default=None,
                       help=f"the engine's router error σ (default {DEFAULT_EXPERTS.router_error:g})")
    group.add_argument("--router-draws", type=number_in(int, *LIMITS["draws"]), default=None,
                       help=f"the values D its error takes (default {DEFAULT_EXPERTS.draws})")
    group.add_argument("--router-draw", type=one_of(DRAWS), default=None,
                       help=f"its error drawn per sequence or per token (default {DEFAULT_EXPERTS.draw})")
    group.add_argument("--expert-spread", type=number_in(float, *SPREAD_RANGE), default=None,
                       help=f"how far the experts' tables differ, κ (default {DEFAULT_EXPERTS.spread:g})")


def experts_of(arguments):
    """(Experts or None, replay mode): None unless --replay is given (always the mixture for a command without it);
    ValueError for --moe-… without it, or a mixture Experts refuses (top-k not below E)."""
    given = {field: getattr(arguments, option) for option, field in MOE_OPTIONS.items()
             if getattr(arguments, option) is not None}
    if not hasattr(arguments, "replay"):
        arguments.replay = "off"
    if arguments.replay is None:
        if given:
            raise ValueError("the mixture of experts is trained with a replay mode: add --replay off, R2 or R3 "
                             "(or a framework's preset)")
        return None, "off"
    replay = REPLAY_PRESETS[arguments.replay].replay if arguments.replay in REPLAY_PRESETS else arguments.replay
    base = DEFAULT_EXPERTS
    if "experts" in given and "top_k" not in given:
        given["top_k"] = min(base.top_k, given["experts"] - 1)
    return Experts(**({name: getattr(base, name) for name in MOE_OPTIONS.values()} | given)), replay


def add_versions_arguments(parser):
    """--switch, --switch-at, --stamp, --mask-stale, --prox and --versions (see the module docstring)."""
    group = parser.add_argument_group("version switches: tokens of one sequence from two policy versions")
    group.add_argument("--switch", type=one_of(SWITCHES), default=None,
                       help="off; fixed: every sequence switches at --switch-at from the lag's version to one newer; "
                            "drawn: its head drawn from 1 … η (η = --lag) and its switch from 1 … T − 1 (default off)")
    group.add_argument("--switch-at", type=number_in(int, 1, 15), default=None, metavar="C",
                       help="the fixed switch's position (1 … T − 1; default 1)")
    group.add_argument("--stamp", type=one_of(STAMPS), default=None,
                       help="what the framework logs as each token's version: token, head or tail (default token)")
    group.add_argument("--mask-stale", action="store_true", help="leave the tokens before the switch out of the loss")
    group.add_argument("--prox", type=one_of(PROXIES), default=None,
                       help="AReaL's π_prox: recompute, or loglinear from the stamps (needs --anchor recompute) "
                            "(default recompute)")
    group.add_argument("--versions", type=one_of(tuple(VERSION_PRESETS)), default=None, metavar="PRESET",
                       help="a framework's version handling (sets --stamp, --mask-stale, --prox): " +
                            ", ".join(VERSION_PRESETS) + " (default: none, the options above)")


def versions_of(arguments):
    """The Versions the options set; ValueError when --versions contradicts --stamp, --mask-stale or --prox."""
    fields = {"switch": arguments.switch or "off", "at": arguments.switch_at or 1}
    chosen = {"stamp": arguments.stamp, "mask_stale": arguments.mask_stale or None, "prox": arguments.prox}
    if arguments.versions is not None:
        preset = VERSION_PRESETS[arguments.versions]
        for name, value in chosen.items():
            if value is not None and value != getattr(preset, name):
                raise ValueError(f"--versions {arguments.versions} sets {name} {getattr(preset, name)}, not "
                                 f"{value}: give one or the other")
        chosen = {name: getattr(preset, name) for name in chosen}
    defaults = {"stamp": "token", "mask_stale": False, "prox": "recompute"}
    return Versions(**fields, **{name: defaults[name] if value is None else value for name, value in chosen.items()})
