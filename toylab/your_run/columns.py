"""Which column of a rollout log is which, and which of the two shapes the log has.

Roles and the names recognised for them (case-insensitive):

    sampler       the inference engine's log-probs of the sampled tokens (log μ), e.g. verl's rollout_log_probs
    trainer       the trainer's log-probs of the same tokens (log π), e.g. verl's old_log_probs
    mask          1 or true = a response token, 0 or false = ignored (prompt, padding); optional
    reward        one number per sequence, or per token in a row-per-sequence log (verl's token_level_scores:
                  summed over the sequence, as verl does); optional
    advantage     the advantage A of each sequence, used when the log has no reward (prime-rl, SkyRL and TRL
                  dump advantages, not rewards): one number per sequence, or per token (its mean over the
                  sequence's response tokens); optional
    sequence_id   which sequence a row belongs to (row-per-token logs only)
    position      the token's place in its sequence (row-per-token logs only; file order otherwise)

Shape: when the log-prob columns hold lists, a row is a sequence ("sequence"); when they hold numbers, a
row is a token ("token") and a sequence id column is required. Any role can be named explicitly; a
column whose first values are all in [0, 1] and not all ≤ 0 looks like probabilities, not
log-probabilities, and is never picked by name alone. The names cover the frameworks' own (NeMo-RL's
generation_logprobs/prev_logprobs/token_loss_mask, slime's and Miles' rollout_log_probs/log_probs/loss_masks,
SkyRL's rollout_logprobs/action_log_probs/loss_mask, prime-rl's inference_logprobs/trainer_logprobs/loss_mask).

Two things a reader would otherwise drop in silence become ``notices`` on the Columns: a numeric column with one
number per sequence when no reward is recognised (it may be the reward), and, in a row-per-token log, a column
named like a position that is not used as the position (tokens then keep file order).
"""

from dataclasses import dataclass, fields
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from toylab.text import listed, quoted
from toylab.your_run.files import LogError, Preview

NAMES = {
    "sampler": ("rollout_log_probs", "rollout_logprobs", "sampler_logprobs", "sampler_log_probs",
                "inference_logprobs", "inference_log_probs", "generation_logprobs", "generation_log_probs",
                "sampling_logprobs", "sampling_per_token_logps"),
    "trainer": ("old_log_probs", "old_logprobs", "trainer_logprobs", "trainer_log_probs", "training_logprobs",
                "training_log_probs", "prev_logprobs", "prev_log_probs", "log_probs", "action_log_probs",
                "old_per_token_logps"),
    "mask": ("response_mask", "loss_mask", "mask", "token_loss_mask", "loss_masks", "completion_mask"),
    "reward": ("reward", "rewards", "score", "scores", "token_level_scores", "token_level_rewards", "acc",
               "raw_reward"),
    "advantage": ("advantage", "advantages"),
    "sequence_id": ("sequence_id", "seq_id", "sample_id", "uid"),
    "position": ("position", "pos", "token_index", "token_position", "position_id", "position_ids"),
}
TITLES = {"sampler": "the sampler's log-probabilities (log μ)", "trainer": "the trainer's log-probabilities (log π)",
          "mask": "the response mask", "reward": "the reward", "advantage": "the advantage",
          "sequence_id": "the sequence id", "position": "the token position"}
POSITION_LIKE = ("pos", "position", "index", "idx", "offset")       # parts of a name that may mean a position
NOT_REWARD_LIKE = ("id", "idx", "index", "len", "length", "step", "rank", "position", "pos", "version", "time",
                   "seed", "epoch", "count", "num", "tokens")
NUMERIC_KINDS = ("number", "list")
MOST_LISTED = 8                       # column names a message lists


@dataclass(frozen=True)
class Columns:
    """The chosen column of each role (None: not in this log) and the log's shape."""
    sampler: str
    trainer: str
    shape: str                        # "sequence": a row per sequence | "token": a row per token
    mask: str | None = None
    reward: str | None = None
    advantage: str | None = None
    sequence_id: str | None = None
    position: str | None = None
    per_token: tuple[str, ...] = ()   # of reward and advantage, the roles whose column holds a list per sequence
    notices: tuple[str, ...] = ()     # what the reader would otherwise drop in silence (module docstring)

    def roles(self) -> dict[str, str]:
        """{role: column} for the roles this log has."""
        return {field.name: getattr(self, field.name) for field in fields(self)
                if field.name not in ("shape", "per_token", "notices") and getattr(self, field.name) is not None}

    def kinds(self) -> dict[str, str]:
        """{column: kind} for ``log_files.read_batches``."""
        per_sequence = self.shape == "sequence"
        kind = {"sampler": "numbers" if per_sequence else "number",
                "trainer": "numbers" if per_sequence else "number",
                "mask": "flags" if per_sequence else "flag", "sequence_id": "key", "position": "number"}
        kind |= {role: "numbers" if role in self.per_token else "number" for role in ("reward", "advantage")}
        return {column: kind[role] for role, column in self.roles().items()}


@dataclass(frozen=True)
class Detection:
    """The best guess per role (None: no guess), the doubts about it, and what a picker may offer."""
    guess: dict[str, str | None]
    doubts: tuple[str, ...]
    numeric: tuple[str, ...]          # columns of numbers or lists of numbers, in file order
    probability_like: tuple[str, ...]  # of those, the ones whose first values look like probabilities

    @property
    def unsure(self) -> bool:
        return bool(self.doubts)


def looks_like_probabilities(values: ArrayLike) -> bool:
    """True if all values are in [0, 1] and not all are ≤ 0: probabilities, not log-probabilities."""
    values = np.asarray(values, dtype=float)
    return bool(values.size and values.min() >= 0 and values.max() <= 1 and values.max() > 0)


def detect(preview: Preview) -> Detection:
    """The Detection for a log's Preview."""
    numeric = tuple(column for column in preview.columns if preview.kinds[column] in NUMERIC_KINDS)
    probability_like = tuple(column for column in numeric if looks_like_probabilities(preview.values(column)))
    guess, doubts = {}, []
    for role, names in NAMES.items():
        found = [column for column in preview.columns if column.lower() in names]
        if role in ("sampler", "trainer"):
            found = [column for column in found if column not in probability_like]
        guess[role] = found[0] if found else None
        if len(found) > 1:
            doubts.append(f"{' and '.join(map(quoted, found))} could each be {TITLES[role]}; using {quoted(found[0])}")
    for role in ("sampler", "trainer"):
        if guess[role] is None:
            named = [column for column in preview.columns if column.lower() in NAMES[role]]
            doubts.append(f"{named[0]} looks like probabilities (its first values are all in [0, 1]), not "
                          f"log-probabilities" if named else
                          f"no column is named like {TITLES[role]} ({', '.join(NAMES[role][::2])}, …)")
    return Detection(guess, tuple(doubts), numeric, probability_like)


def choose(preview: Preview, name: str, **explicit: str | None) -> Columns:
    """The Columns: the explicit choices (role=column) where given, else the detected guesses; LogError
    (naming the file ``name``) if a role is missing or a column does not fit its role."""
    for role, column in explicit.items():
        if column is not None and column not in preview.columns:
            raise LogError(f"{name}: no column {quoted(column)} for {TITLES[role]} (columns: {listed(preview.columns, MOST_LISTED)})")
    detection = detect(preview)
    chosen: dict[str, Any] = {role: explicit.get(role) or detection.guess[role] for role in NAMES}   # or None
    for role in ("sampler", "trainer"):
        named = [column for column in detection.probability_like if column.lower() in NAMES[role]]
        if chosen[role] is None and named:
            raise LogError(f"{name}: column {quoted(named[0])} looks like probabilities, not log-probabilities: its first "
                           "values are all in [0, 1]; give log-probabilities in nats (the log of these)")
        if chosen[role] is None:
            options = listed(detection.numeric, MOST_LISTED) or "none"
            raise LogError(f"{name}: which column holds {TITLES[role]}? None is named {', '.join(NAMES[role])} "
                           f"(numeric columns: {options})")
    if chosen["sampler"] == chosen["trainer"]:
        raise LogError(f"{name}: column {quoted(chosen['sampler'])} cannot hold both the sampler's and the trainer's "
                       "log-probabilities")
    shape = _shape(preview, name, chosen)
    if shape == "sequence":
        chosen["sequence_id"] = chosen["position"] = None
    elif chosen["sequence_id"] is None:
        raise LogError(f"{name}: the log-prob columns hold one number per row, so a row is a token and a column "
                       f"saying which sequence it belongs to is needed; none is named "
                       f"{', '.join(NAMES['sequence_id'])}")
    _check_roles(preview, name, chosen, shape)
    per_token = tuple(role for role in ("reward", "advantage") if chosen[role] and preview.kinds[chosen[role]] == "list")
    return Columns(shape=shape, **chosen, per_token=per_token, notices=_notices(preview, chosen, shape))


def _notices(preview, chosen, shape):
    """A numeric column that may be the reward when none is chosen; a position-like column left unused."""
    used = set(chosen.values())
    notices = []
    if chosen["reward"] is None:
        scalar = "number" if shape == "sequence" else None
        candidates = [column for column in preview.columns if column not in used and preview.kinds[column] == scalar
                      and not any(part in column.lower() for part in NOT_REWARD_LIKE)]
        if candidates:
            notices.append(f"no reward column is recognised, but {listed(candidates, 3)} "
                           f"{'holds' if len(candidates) == 1 else 'hold'} one number per sequence and may be the "
                           f"reward: choose it as the reward (--reward {candidates[0]}) to see E_μ[r] and the IS "
                           "estimates of J")
    if shape == "token" and chosen["position"] is None:
        unused = [column for column in preview.columns if column not in used and preview.kinds[column] == "number"
                  and any(part in column.lower() for part in POSITION_LIKE)]
        if unused:
            notices.append(f"column {quoted(unused[0])} may hold token positions but is not used: each sequence's "
                           f"tokens keep the file's order; choose it as the position (--position {unused[0]}) if "
                           "the rows are not in order")
    return tuple(notices)


def _shape(preview, name, chosen):
    kinds = {role: preview.kinds[chosen[role]] for role in ("sampler", "trainer")}
    for role, kind in kinds.items():
        if kind not in NUMERIC_KINDS:
            row, value = preview.first[chosen[role]]
            raise LogError(f"{name}: row {row}, column {quoted(chosen[role])}: {value} is not a log-probability (the "
                           f"column holds {_kind_words(kind)}; it was taken for {TITLES[role]})")
    if kinds["sampler"] != kinds["trainer"]:
        raise LogError(f"{name}: {quoted(chosen['sampler'])} holds {_kind_words(kinds['sampler'])} but "
                       f"{quoted(chosen['trainer'])} holds {_kind_words(kinds['trainer'])}; both must be lists "
                       "(a row per sequence) or both numbers (a row per token)")
    return "sequence" if kinds["sampler"] == "list" else "token"


def _check_roles(preview, name, chosen, shape):
    per_sequence = ("number", "list", "empty") if shape == "sequence" else ("number", "empty")
    allowed = {"mask": ("list", "bools", "empty") if shape == "sequence" else ("number", "bool", "empty"),
               "reward": per_sequence, "advantage": per_sequence, "sequence_id": ("number", "text", "empty"),
               "position": ("number", "empty")}
    for role, kinds in allowed.items():
        column = chosen[role]
        if column is not None and preview.kinds[column] not in kinds:
            row, value = preview.first[column]
            raise LogError(f"{name}: row {row}, column {quoted(column)} ({TITLES[role]}): {value}; in a log with a row per "
                           f"{shape} it should hold {_kind_words(kinds[0])}")


def _kind_words(kind):
    return {"number": "numbers", "list": "lists of numbers", "bool": "true/false values",
            "bools": "lists of true/false", "text": "text", "empty": "nothing"}[kind]
