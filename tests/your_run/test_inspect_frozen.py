"""``python -m toylab inspect … --json`` gives the numbers the code before issue 38 gave (main 7eb0cc2, frozen in
frozen_inspect/numbers.json by frozen_inspect/generate.py): on the example logs, the example run (with the default
estimators and with every exact one), prime-rl's and SkyRL's recorded dumps and a NeMo-RL run its own writer wrote.
Every number to 1e-12 relative (the chunked pass sums each sequence's tokens as the whole array did, bit for bit;
the spreads and the correlation of π and μ are summed chunk by chunk and move in their last bits), every count,
text and key exactly; and the same with the steps summarised by two local processes.

The numbers were frozen under numpy 2.4 (requirements-dev.txt's): under numpy 1.26 the old code's own numbers move
(its log1p changes the last bits of NeMo-RL's js se by 1.2e-12, its argpartition picks other tokens among tied worst
ones), so there the comparison is skipped; old and new code agree there to 2e-15 as well (docs/your-run.md)."""

import contextlib
import importlib.util
import io
import json
import math
from pathlib import Path

import numpy as np
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
FROZEN_UNDER = pytest.mark.skipif(np.lib.NumpyVersion(np.__version__) < "2.0.0",
                                  reason="frozen under numpy 2: numpy 1's log1p and argpartition move the old numbers")
FAST = ("rollouts_per_token.jsonl", "rollouts_per_sequence.parquet", "example run", "prime-rl", "SkyRL", "NeMo-RL")


@pytest.fixture(scope="module")
def nemo(tmp_path_factory):
    return generate.nemo_run(tmp_path_factory.mktemp("nemo"))


def differences(old, new, path=""):
    """[where, old, new] of every number further than RELATIVE apart, and every other value that differs."""
    if isinstance(old, dict) and isinstance(new, dict) and list(old) == list(new):
        return [found for key in old for found in differences(old[key], new[key], f"{path}.{key}")]
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [found for index, (a, b) in enumerate(zip(old, new, strict=True))
                for found in differences(a, b, f"{path}[{index}]")]
    if isinstance(old, float) and isinstance(new, float):
        return [] if math.isclose(old, new, rel_tol=RELATIVE, abs_tol=0.0) or (math.isnan(old) and math.isnan(new)) \
            else [(path, old, new)]
    return [] if old == new and type(old) is type(new) else [(path, old, new)]


def inspected(argv, run, *options):
    with contextlib.chdir(ROOT), contextlib.redirect_stdout(io.StringIO()) as out:
        assert main([str(run) if item == "RUN" else item for item in argv] + ["--json", *options]) == 0
    return json.loads(out.getvalue().replace(json.dumps(str(run))[1:-1], "RUN"))


@FROZEN_UNDER
@pytest.mark.parametrize("case", fast_then_slow(list(generate.CASES), FAST))
def test_inspect_gives_the_old_numbers_to_1e_12(case, nemo):
    assert differences(NUMBERS[case], inspected(generate.CASES[case], nemo)) == []


@FROZEN_UNDER
@pytest.mark.parametrize("case", fast_then_slow(["example run", "prime-rl", "NeMo-RL"], ("NeMo-RL",)))
def test_two_local_workers_give_the_old_numbers_to_1e_12(case, nemo):
    assert differences(NUMBERS[case], inspected(generate.CASES[case], nemo, "--workers", "2")) == []


def test_the_frozen_numbers_can_tell_a_change():
    """The comparison fails on a number moved by 1e-11 relative, or a count moved by one."""
    changed = json.loads(json.dumps(NUMBERS["example run"]))
    step = changed["steps"][3]
    step["k1"]["value"] *= 1 + 1e-11
    step["sequences"] += 1
    assert [where for where, _, _ in differences(NUMBERS["example run"], changed)] == \
        [".steps[3].sequences", ".steps[3].k1.value"]
