"""``python -m toylab inspect … --json`` gives the numbers the code before issue 38 gave (main 7eb0cc2, frozen in
frozen_inspect/numbers.json by frozen_inspect/generate.py): on the example logs, the example run (with the default
estimators and with every exact one), prime-rl's and SkyRL's recorded dumps and a NeMo-RL run its own writer wrote.
Every number to 1e-12 of its size (the chunked pass sums each sequence's tokens as the whole array did, bit for bit;
the spreads and the correlation of π and μ are summed chunk by chunk and move in their last bits) or of its scale
(``differences``), every count, text and key exactly; and the same with the steps summarised by two local processes.
The numbers were frozen under numpy 2.4 on AVX-512; the scales are what numpy 1.26's log1p and the SSE4.2 paths' exp
(CI runs both) move in the old code's numbers too: NeMo-RL's js se by 1.2e-12 of itself, mean ρ − 1 by 1.7e-12."""

import contextlib
import importlib.util
import io
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tiers import fast_then_slow

from toylab.cli.main import main

FROZEN = Path(__file__).parent / "frozen_inspect"
ROOT = Path(__file__).resolve().parents[2]
RELATIVE = 1e-12


def frozen_cases():
    """frozen_inspect/generate.py, imported under a name of its own (each framework's reference has a generate.py)."""
    spec = importlib.util.spec_from_file_location("frozen_inspect_generate", FROZEN / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


generate = frozen_cases()
NUMBERS = json.loads((FROZEN / "numbers.json").read_text())
FAST = ("rollouts_per_token.jsonl", "rollouts_per_sequence.parquet", "example run", "prime-rl", "SkyRL", "NeMo-RL")


@pytest.fixture(scope="module")
def nemo(tmp_path_factory):
    return generate.nemo_run(tmp_path_factory.mktemp("nemo"))


def differences(old, new, path="", scale=0.0):
    """[(where, old, new)] of every number further apart than RELATIVE of its size or of ``scale``, and every other
    value that differs. A standard error's scale is its estimate's value (it is computed from sums of that size:
    their last bits move it by more than its own 1e-12); a mean near 1 minus 1 (``SHIFTED``) has scale 1. Of the
    worst tokens and sequences only the values are compared: which of several tokens with one |log ρ| is listed is
    numpy's argpartition's choice, and its SIMD paths choose differently (the old code's too)."""
    if isinstance(old, dict) and isinstance(new, dict) and list(old) == list(new):
        shifted = old.get("name") in SHIFTED or any(path.endswith(f".{name}") for name in SHIFTED)
        value = abs(old["value"]) if isinstance(old.get("value"), float) else 0.0
        scales = {"value": 1.0 if shifted else 0.0, "se": max(value, 1.0 if shifted else 0.0)}
        return [found for key in old for found in differences(*_listed(key, old[key], new[key]), f"{path}.{key}",
                                                              scales.get(key, 0.0))]
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [found for index, (a, b) in enumerate(zip(old, new, strict=True))
                for found in differences(a, b, f"{path}[{index}]")]
    if isinstance(old, float) and isinstance(new, float):
        return [] if math.isclose(old, new, rel_tol=RELATIVE, abs_tol=RELATIVE * scale) or \
            (math.isnan(old) and math.isnan(new)) else [(path, old, new)]
    return [] if old == new and type(old) is type(new) else [(path, old, new)]


SHIFTED = {"identity_mean_rho_minus_1", "chi2_token", "rollout_corr/chi2_token", "rollout_corr/chi2_seq"}
WORST = {"worst_tokens": "log_rho", "worst_sequences": "log_W"}


def _listed(key, old, new):
    """The values of the worst tokens or sequences only; anything else as it is."""
    if key in WORST and isinstance(old, list) and isinstance(new, list):
        return [row[WORST[key]] for row in old], [row[WORST[key]] for row in new]
    return old, new


def inspected(argv, run, *options):
    with contextlib.chdir(ROOT), contextlib.redirect_stdout(io.StringIO()) as out:
        assert main([str(run) if item == "RUN" else item for item in argv] + ["--json", *options]) == 0
    return json.loads(out.getvalue().replace(json.dumps(str(run))[1:-1], "RUN"))


@pytest.mark.parametrize("case", fast_then_slow(list(generate.CASES), FAST))
def test_inspect_gives_the_old_numbers_to_1e_12(case, nemo):
    assert differences(NUMBERS[case], inspected(generate.CASES[case], nemo)) == []


@pytest.mark.parametrize("case", fast_then_slow(["example run", "prime-rl", "NeMo-RL"], ("NeMo-RL",)))
def test_two_local_workers_give_the_old_numbers_to_1e_12(case, nemo):
    """In a process of its own, as from the command line: a pool's processes import the main module's file, and a
    page test in this process leaves the page's script there."""
    argv = [str(nemo) if item == "RUN" else item for item in generate.CASES[case]]
    done = subprocess.run([sys.executable, "-m", "toylab", *argv, "--json", "--workers", "2"], cwd=ROOT,
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
    result = json.loads(done.stdout.replace(json.dumps(str(nemo))[1:-1], "RUN"))
    assert done.stderr == "" and differences(NUMBERS[case], result) == []


def test_the_frozen_numbers_can_tell_a_change():
    """The comparison fails on a number moved by 1e-11 relative, a mean ρ − 1 moved by 2e-12, or a count by one."""
    changed = json.loads(json.dumps(NUMBERS["example run"]))
    step = changed["steps"][3]
    step["k1"]["value"] *= 1 + 1e-11
    step["sequences"] += 1
    step["identity_mean_rho_minus_1"]["value"] += 2e-12
    assert [where for where, _, _ in differences(NUMBERS["example run"], changed)] == \
        [".steps[3].sequences", ".steps[3].k1.value", ".steps[3].identity_mean_rho_minus_1.value"]
