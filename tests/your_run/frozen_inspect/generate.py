"""Writes numbers.json: ``python -m toylab inspect … --json`` of the example logs, the example run and the frameworks'
recorded and written dumps, as the code BEFORE issue 38 (main 7eb0cc2) computed them, for
tests/your_run/test_inspect_frozen.py to hold today's code to (every number to 1e-12 relative).

Run it with that code first on the path, from the repository's root:

    git archive 7eb0cc2 toylab | tar -x -C /tmp/old && PYTHONPATH=/tmp/old python tests/your_run/frozen_inspect/generate.py

(``CASES`` are the command lines; a case's run written into a temporary directory — NeMo-RL's — is named RUN in its
command line and in the JSON.)
"""

import contextlib
import io
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(1, str(ROOT / "tests"))

from framework_dumps import toy_batch, write_nemo  # noqa: E402

from toylab.catalogue.estimators import ESTIMATORS  # noqa: E402
from toylab.cli.main import main  # noqa: E402

EXAMPLES = sorted(path.name for path in (ROOT / "examples").glob("rollouts_per_*") if path.suffix != ".py")
EVERY_EXACT = ",".join(id for id, estimator in ESTIMATORS.items() if estimator.exact and not estimator.on_policy)
RECORDED = "tests/framework_writers/recorded"
CASES = {
    **{example: ["inspect", f"examples/{example}"] for example in EXAMPLES},
    "example run": ["inspect", "examples/example_run.zip"],
    "example run, every exact estimator": ["inspect", "examples/example_run.zip", "--estimators", EVERY_EXACT],
    "prime-rl": ["inspect", f"{RECORDED}/prime_rl/token_exports"],
    "SkyRL": ["inspect", f"{RECORDED}/skyrl/dumped_data"],
    "NeMo-RL": ["inspect", "RUN"],
}
NEMO_STEPS = (1, 2, 3, 4)


def nemo_run(directory):
    """NeMo-RL's train_data_step{N}.jsonl for NEMO_STEPS, written by its own logging code on toy batches."""
    for step in NEMO_STEPS:
        write_nemo(directory, step, toy_batch(60, seed=step))
    return directory


def inspected(argv, run):
    """The JSON of ``python -m toylab`` on ``argv`` (RUN standing for ``run``), RUN written back for ``run``."""
    with contextlib.redirect_stdout(io.StringIO()) as out:
        assert main([str(run) if item == "RUN" else item for item in argv] + ["--json"]) == 0
    return json.loads(out.getvalue().replace(json.dumps(str(run))[1:-1], "RUN"))


def generate():
    with tempfile.TemporaryDirectory() as directory:
        run = nemo_run(Path(directory))
        return {name: inspected(argv, run) for name, argv in CASES.items()}


if __name__ == "__main__":
    import os

    import toylab
    print(f"numbers of the toylab at {Path(toylab.__file__).parent}", file=sys.stderr)
    os.chdir(ROOT)
    (Path(__file__).parent / "numbers.json").write_text(json.dumps(generate(), indent=0) + "\n")
