"""Record what the torch-needing writers write, for the tests that run without torch:

    tests/framework_writers/recorded/prime_rl/token_exports/step_S/rank_R.jsonl   prime-rl's TokenExporter, steps
        PRIME_STEPS × ranks PRIME_RANKS (tests/framework_dumps.py), from toy batches; batches.json beside them holds
        the batches fed to it
    tests/framework_writers/recorded/skyrl/dumped_data/global_step_3_training_input.pkl   SkyRL's dump_data, and
        global_step_3_training_input.parquet beside it, written by toylab's SKYRL_EXPORT command from that pickle;
        batch.json holds the batch

Run from the repository's root with a Python that has torch and toylab's requirements:

    PYTHONPATH=.:tests python tests/framework_writers/record.py

With torch installed, tests/your_run/test_framework_writers.py runs the writers again and checks that they write
these files byte for byte.
"""

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from framework_dumps import PRIME_RANKS, PRIME_STEPS, RECORDED, entropies, toy_batch

from framework_writers import prime_rl, skyrl
from toylab.your_run.dumps import SKYRL_EXPORT

V = 4


def prime_steps():
    """{step: {rank: (Batch, entropies)}} of the recorded prime-rl run."""
    steps = {}
    for step in PRIME_STEPS:
        for rank in PRIME_RANKS:
            batch = toy_batch(6 + rank, seed=10 * step + rank, repeats=(1, 2))
            steps.setdefault(step, {})[rank] = (batch, entropies(batch))
    return steps


def skyrl_batch():
    return toy_batch(5, seed=33, repeats=(1, 2))


def export(pickle_path):
    """Run SKYRL_EXPORT on a SkyRL pickle, in a process that can import SkyRL's class (framework_writers.skyrl)."""
    with tempfile.TemporaryDirectory() as shim:
        command = shlex.split(SKYRL_EXPORT.replace("FILE.pkl", str(pickle_path)))
        path = os.pathsep.join([skyrl.importable(shim), str(Path(__file__).parents[1]), *sys.path])
        subprocess.run([sys.executable, *command[1:]], env={**os.environ, "PYTHONPATH": path}, check=True)
    return Path(str(pickle_path)[:-4] + ".parquet")


def batch_json(batch, entropy=None):
    return {"sampler": batch.sampler, "trainer": batch.trainer, "rewards": batch.rewards.tolist(),
            "advantages": batch.advantages.tolist(), **({"entropy": entropy} if entropy is not None else {})}


def main():
    folder = RECORDED / "prime_rl"
    shutil.rmtree(folder, ignore_errors=True)
    steps = prime_steps()
    prime_rl.export_run(folder, steps, V)
    batches = {f"{step},{rank}": batch_json(*steps[step][rank]) for step in steps for rank in steps[step]}
    (folder / "batches.json").write_text(json.dumps(batches, indent=0) + "\n")
    folder = RECORDED / "skyrl"
    shutil.rmtree(folder, ignore_errors=True)
    export(skyrl.dump(folder, 3, skyrl_batch()))
    (folder / "batch.json").write_text(json.dumps(batch_json(skyrl_batch()), indent=0) + "\n")


if __name__ == "__main__":
    main()
