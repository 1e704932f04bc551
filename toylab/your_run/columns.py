"""Which column of a rollout log is which, and which of the two shapes the log has.

Roles and the names recognised for them (case-insensitive):

    sampler       the inference engine's log-probs of the sampled tokens (log μ), e.g. verl's rollout_log_probs
    trainer       the trainer's log-probs of the same tokens (log π), e.g. verl's old_log_probs
    mask          1 = a response token, 0 = ignored (prompt, padding); optional
    reward        one number per sequence; optional
    sequence_id   which sequence a row belongs to (row-per-token logs only)
    position      the token's place in its sequence (row-per-token logs only; file order otherwise)

Shape: when the log-prob columns hold lists, a row is a sequence ("sequence"); when they hold numbers, a
row is a token ("token") and a sequence id column is required. Any role can be named explicitly; a
column whose first values are all in [0, 1] and not all ≤ 0 looks like probabilities, not
log-probabilities, and is never picked by name alone.
"""

from dataclasses import dataclass, fields

import numpy as np

from toylab.text import listed, quoted
from toylab.your_run.files import LogError

NAMES = {
    "sampler": ("rollout_log_probs", "rollout_logprobs", "sampler_logprobs", "sampler_log_probs",
                "inference_logprobs", "inference_log_probs"),
    "trainer": ("old_log_probs", "old_logprobs", "trainer_logprobs", "trainer_log_probs", "training_logprobs",
                "training_log_probs"),
    "mask": ("response_mask", "loss_mask", "mask"),
    "reward": ("reward", "rewards", "score", "scores"),
    "sequence_id": ("sequence_id", "seq_id", "sample_id", "uid"),
    "position": ("position", "pos", "token_index", "token_position"),
}
TITLES = {"sampler": "the sampler's log-probabilities (log μ)", "trainer": "the trainer's log-probabilities (log π)",
          "mask": "the response mask", "reward": "the reward", "sequence_id": "the sequence id",
          "position": "the token position"}
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
    sequence_id: str | None = None
    position: str | None = None

    def roles(self):
        """{role: column} for the roles this log has."""
        return {field.name: getattr(self, field.name) for field in fields(self)
                if field.name != "shape" and getattr(self, field.name) is not None}

    def kinds(self):
        """{column: kind} for ``log_files.read_batches``."""
        per_sequence = self.shape == "sequence"
        kind = {"sampler": "numbers" if per_sequence else "number",
                "trainer": "numbers" if per_sequence else "number",
                "mask": "flags" if per_sequence else "flag", "reward": "number", "sequence_id": "key",
                "position": "number"}
        return {column: kind[role] for role, column in self.roles().items()}


@dataclass(frozen=True)
class Detection:
    """The best guess per role (None: no guess), the doubts about it, and what a picker may offer."""
    guess: dict
    doubts: tuple
    numeric: tuple                    # columns of numbers or lists of numbers, in file order
    probability_like: tuple           # of those, the ones whose first values look like probabilities

    @property
    def unsure(self):
        return bool(self.doubts)


def looks_like_probabilities(values):
    """True if all values are in [0, 1] and not all are ≤ 0: probabilities, not log-probabilities."""
    values = np.asarray(values, dtype=float)
    return bool(values.size and values.min() >= 0 and values.max() <= 1 and values.max() > 0)


def detect(preview):
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


def choose(preview, name, **explicit):
    """The Columns: the explicit choices (role=column) where given, else the detected guesses; LogError
    (naming the file ``name``) if a role is missing or a column does not fit its role."""
    for role, column in explicit.items():
        if column is not None and column not in preview.columns:
            raise LogError(f"{name}: no column {quoted(column)} for {TITLES[role]} (columns: {listed(preview.columns, MOST_LISTED)})")
    detection = detect(preview)
    chosen = {role: explicit.get(role) or detection.guess[role] for role in NAMES}
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
    return Columns(shape=shape, **chosen)


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
    allowed = {"mask": ("list", "bools", "empty") if shape == "sequence" else ("number", "bool", "empty"),
               "reward": ("number", "empty"), "sequence_id": ("number", "text", "empty"),
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
