"""``python -m toylab``: the exact table of every exact estimator on one toy, as text or JSON.

The framework presets (framework:option ids) are left out unless named with ``--estimators``. The command line accepts
exactly the page's ranges (``state.query``: T, V, mismatch, seed, N, the size limit, each threshold's range) and
refuses anything else before any work (``arguments``). An undefined number (the cosine of a zero mean gradient)
is "—" in the text and null in the JSON, with its reason (a note line under the table; the JSON's "notes").

``--reference-distance D`` adds the KL view (``analysis.kl_view``): π_ref at θ_0 + D·d, and each KL setting's
estimate of ∇KL(π‖π_ref) on the engine's tokens (``--kl ID,…``: presets or ESTIMATOR.PLACEMENT settings; default
``kl_settings.VIEW_SETTINGS``), as a second table and the JSON's "reference"; ``--beta B`` adds each setting's error
in the penalised update (the view's numbers are per unit β otherwise).
"""


from toylab.analysis.diagnostics import diagnostics
from toylab.analysis.kl_view import kl_table, reference_summary
from toylab.catalogue import kl_settings
from toylab.catalogue.estimators import EXACT_IDS
from toylab.catalogue.kl import BETA_RANGE
from toylab.catalogue.pipelines import CUSTOM
from toylab.cli.arguments import (
    DEFAULT_IDS,
    ToylabParser,
    add_batch_size_argument,
    add_toy_arguments,
    json_text,
    number_in,
    program,
    validate_toy_arguments,
)
from toylab.engine.moments import exact_table
from toylab.engine.reference import DISTANCE_RANGE, Reference
from toylab.engine.sampler import Sampler
from toylab.engine.toy import make_toy
from toylab.text import UNDEFINED, quoted

COLUMNS = [("rel_bias", "rel bias", "{:.4f}"), ("rel_std", "rel std", "{:.4f}"), ("rel_rmse", "rel RMSE", "{:.4f}"),
           ("cosine", "cosine", "{:+.4f}"), ("tokens_affected", "tokens hit", "{:.2%}"),
           ("sequences_affected", "seqs hit", "{:.2%}")]
SPLIT_COLUMNS = [("rel_out_of_reach", "out of reach", "{:.4f}"), ("rel_within_reach", "within reach", "{:.4f}")]     # when μ truncates
PLAIN_COLUMNS = [("rel_plain_bias", "vs plain", "{:.4f}")]          # when the trainer scores another π


def table_ids(listed):
    """The ids of ``--estimators ID,...`` (checked), or the default table."""
    if listed is None:
        return DEFAULT_IDS
    ids = [id.strip() for id in listed.split(",") if id.strip()]
    for id in ids:
        if id not in EXACT_IDS:
            raise ValueError(f"--estimators: {quoted(id)} is not an exact estimator (known: {', '.join(EXACT_IDS)})")
    return tuple(dict.fromkeys(ids))


def table_parser():
    parser = ToylabParser(prog=program(), description=__doc__.splitlines()[0])
    add_toy_arguments(parser)
    add_batch_size_argument(parser)
    parser.add_argument("--estimators", metavar="ID,...",
                        help="the exact estimators to show, presets included (default: all but the presets)")
    parser.add_argument("--reference-distance", type=number_in(float, *DISTANCE_RANGE), default=None, metavar="D",
                        help="add the KL view: π_ref at θ_0 + D·d (d a seeded standard normal direction), {:g} to {:g} "
                             "(default: none, no KL view)".format(*DISTANCE_RANGE))
    parser.add_argument("--kl", metavar="ID,...", default=None,
                        help="the KL settings of the view: presets (verl:kl_loss) or ESTIMATOR.PLACEMENT[.MODIFIER] "
                             "(k3.loss.engine, k1.reward.to_go.seq_is); default: " + ",".join(kl_settings.VIEW_SETTINGS))
    parser.add_argument("--beta", type=number_in(float, *BETA_RANGE), default=None, metavar="B",
                        help="the penalty's β, {:g} to {:g}: each KL setting's error in the update of J − β·KL, relative "
                             "to ∇J − β·∇KL (needs --reference-distance; default: none, the view per unit β)"
                             .format(*BETA_RANGE))
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def kl_ids(listed):
    """The KL settings of ``--kl ID,…`` (each checked), or the view's default list."""
    if listed is None:
        return kl_settings.VIEW_SETTINGS
    ids = tuple(dict.fromkeys(id.strip() for id in listed.split(",") if id.strip()))
    for id in ids:
        kl_settings.parse(id)
    if not ids:
        raise ValueError("--kl: name at least one KL setting")
    return ids


def report(arguments):
    """The result as plain data: the toy's numbers, one row per estimator (cosine None when undefined), and
    "notes": 'id: why' for each undefined number."""
    toy = make_toy(arguments.T, arguments.V, arguments.mismatch, arguments.seed, arguments.sampler_model)
    population = diagnostics(toy)
    rows = exact_table(toy, arguments.selection, arguments.baseline, arguments.N)
    notes = [f"{row['estimator']}: {row['note']}" for row in rows if row["note"]]
    if toy.truncates:
        notes.append(TRUNCATION_NOTE)
    if toy.sampler.scored != "plain":
        notes.append(PLAIN_NOTE)
    return {
        "toy": toy_summary(toy) | {
            "J": population.J, "logged_reward": population.logged_reward,
            "grad_norm": population.grad_norm, "kl_mu_pi": population.kl_mu_pi,
            "kl_pi_mu": population.kl_pi_mu, "chi2_seq": population.chi2_seq, "ess": population.ess,
            "unreachable_mass": population.unreachable_mass, "identity": population.identity}
        | ({} if population.plain_J is None else {"plain_J": population.plain_J,
                                                    "objective_shift": population.objective_shift})
        | ({} if arguments.pipeline == CUSTOM else {"pipeline": arguments.pipeline}),
        "N": arguments.N, "baseline": arguments.baseline,
        "estimators": [{"name": row.pop("estimator"), **{key: value for key, value in row.items() if key != "note"}}
                       for row in rows],
        "notes": notes,
    } | ({} if arguments.reference_distance is None else {"reference": reference_report(toy, arguments)})


def reference_report(toy, arguments):
    """The KL view: the reference's distance and KLs, and a row per setting (``kl_view.kl_table``)."""
    reference = Reference(arguments.reference_distance)
    return reference_summary(toy, reference) | {"beta": arguments.beta} \
        | {"settings": kl_table(toy, arguments.kl_ids, reference, arguments.N, arguments.beta)}


TRUNCATION_NOTE = ("kl_pi_mu is infinite (null): the sampler never draws some tokens π gives mass to. out of reach: "
                   "‖∇J − ∇J_S‖/‖∇J‖, ∇J's part from the sequences it never draws (the same for every estimator "
                   "on μ; no weight removes it; seq_is's whole bias); within reach: ‖E[ĝ] − ∇J_S‖/‖∇J‖, the "
                   "estimator's own error on what it draws; bias = out of reach + within reach as vectors, so "
                   "|out of reach − within reach| ≤ rel_bias ≤ out of reach + within reach: out of reach is not a "
                   "floor under the bias")


PLAIN_NOTE = ("the trainer scores another π than softmax(θ): J, ∇J, every bias and the relative errors are those of "
              "its objective E_π[r]; vs plain: ‖E[ĝ] − ∇J_plain‖/‖∇J_plain‖, against softmax(θ)'s gradient; "
              "objective_shift: ‖∇J − ∇J_plain‖/‖∇J_plain‖")


def toy_summary(toy):
    """The toy's arguments as the JSON echoes them: T, V, M, mismatch, seed, the sampler's four parameters and the
    pipeline's logged and scored."""
    return {"T": toy.T, "V": toy.V, "M": toy.M, "mismatch": toy.mismatch, "seed": toy.seed} \
        | toy.sampler.parameters()


def toy_line(toy):
    """'T=6 V=4 M=4,096 mismatch=0.3 seed=0' and the sampler and pipeline when they are not the default."""
    sampler = {key: toy[key] for key in ("top_p", "top_k", "temperature", "precision", "logged", "scored")}
    described = Sampler(**sampler)
    return (f"T={toy['T']} V={toy['V']} M={toy['M']:,} mismatch={toy['mismatch']:g} seed={toy['seed']}"
            + ("" if described.is_default else f" sampler: {described.describe()}"))


def as_text(result):
    toy = result["toy"]
    lines = [f"{toy_line(toy)}   "
             f"J={toy['J']:.5f}  E_mu[r]={toy['logged_reward']:.5f}  |grad J|={toy['grad_norm']:.5f}  "
             f"KL(mu||pi)={toy['kl_mu_pi']:.4f}  chi2_seq={toy['chi2_seq']:.4g}  ESS={toy['ess']:.3f}"
             f"  E_mu[W]={toy['identity']:.4f}"
             + (f"  pi-mass out of reach={toy['unreachable_mass']:.4f}" if toy["unreachable_mass"] else "")
             + (f"  J(softmax theta)={toy['plain_J']:.5f}  objective shift={toy['objective_shift']:.4f}"
                if "plain_J" in toy else ""),
             f"batch size N={result['N']}, baseline={result['baseline']}", ""]
    columns = COLUMNS + (SPLIT_COLUMNS if toy["unreachable_mass"] else []) + (PLAIN_COLUMNS if "plain_J" in toy else [])
    name_width = max(len(row["name"]) for row in result["estimators"]) + 2
    lines.append("estimator".ljust(name_width) + "".join(f"{title:>11}" for _, title, _ in columns) + "  unbiased")
    for row in result["estimators"]:
        cells = "".join(f"{UNDEFINED if row[key] is None else style.format(row[key]):>11}" for key, _, style in columns)
        lines.append(row["name"].ljust(name_width) + cells + ("  yes" if row["unbiased"] else "  no"))
    lines += [""] * bool(result["notes"]) + [f"{UNDEFINED} {note}" for note in result["notes"]]
    return "\n".join(lines + (reference_lines(result["reference"], result["N"]) if "reference" in result else []))


KL_COLUMNS = [("cosine", "cosine", "{:+.4f}"), ("rel_bias", "rel bias", "{:.4f}"), ("rel_std", "rel std", "{:.4f}"),
              ("rel_rmse", "rel RMSE", "{:.4f}"), ("reverse_cosine", "cos rev", "{:+.4f}"),
              ("on_policy_rel_bias", "on-policy", "{:.4f}")]


PENALISED_COLUMNS = [("penalised_rel_bias", "beta bias", "{:.4f}"), ("penalised_rel_std", "beta std", "{:.4f}")]


def reference_lines(reference, N):
    """The KL view as text: the reference's line, then a row per setting."""
    reverse = UNDEFINED if reference["kl_reverse"] is None else f"{reference['kl_reverse']:.4f}"
    lines = ["", f"reference pi_ref at theta_0 + {reference['distance']:g}*d:  KL(pi||pi_ref)="
                 f"{reference['kl_forward']:.4f}  KL(pi_ref||pi)={reverse}  |grad KL|={reference['grad_norm']:.5f};  "
                 f"each setting's estimate of grad KL(pi||pi_ref) on the engine's tokens, batch size N={N}", ""]
    width = max(len(row["setting"]) for row in reference["settings"]) + 2
    columns = KL_COLUMNS + (PENALISED_COLUMNS if reference["beta"] is not None else [])
    lines.append("KL setting".ljust(width) + f"{'weight':>9}" + "".join(f"{title:>11}" for _, title, _ in columns))
    for row in reference["settings"]:
        cells = "".join(f"{UNDEFINED if row[key] is None else style.format(row[key]):>11}" for key, _, style in columns)
        lines.append(row["setting"].ljust(width) + f"{row['weight']:>9}" + cells)
    lines.append("weight: the ratio on a loss term, the advantage's correction of a reward term; cos rev: against "
                 "grad KL(pi_ref||pi); on-policy: the rel bias with mu := pi")
    if reference["beta"] is not None:
        lines.append(f"beta bias, beta std: at beta={reference['beta']:g}, beta*|E g - grad KL| and beta*std at N, "
                     "relative to |grad J - beta*grad KL|: the setting's error in the penalised update")
    return lines


def main(argv):
    parser = table_parser()
    arguments = parser.parse_args(argv)
    try:
        ids = table_ids(arguments.estimators)
        arguments.kl_ids = kl_ids(arguments.kl)
        if arguments.reference_distance is None and (arguments.kl is not None or arguments.beta is not None):
            raise ValueError(f"--{'kl' if arguments.kl is not None else 'beta'} sets the KL view: give "
                             "--reference-distance D (where π_ref sits)")
    except ValueError as error:
        parser.error(str(error))
    arguments = validate_toy_arguments(parser, arguments, ids)
    try:
        result = report(arguments)
    except (ValueError, MemoryError) as error:
        parser.error(str(error) if isinstance(error, ValueError) else "out of memory: use a smaller toy")
    print(json_text(result) if arguments.json else as_text(result))
    return 0
