"""Training's cost model (toylab/training/cost.py) against the runs it predicts, on a grid of T, V, N, runs, steps and
estimators, in both modes.

    python benchmarks/training_cost.py [--json out.json] [--quick] [--mode expected|sampled] [--policies]

Each point runs twice, each time in a fresh process. First for its time: the model's prediction (the probe of small
copies, timed), then the run itself, ``train``, timed by its thread's CPU time (what the probe measures: the page's
server runs other sessions' work beside it) and by the wall clock (against the probe's CPU seconds times its
slowdown). Then for its memory, the run alone: the rise of the process's resident high-water mark (VmHWM) over its
resident size just before (after a probe, the run reuses what the probe's copies freed and the process kept, and
would seem to add less). Printed: predicted and measured seconds and MB, their ratio (predicted / measured), the
probe's own seconds, and the load average (2 shared cores here: a loaded machine slows the run and the probe alike,
but not always by as much). ``--policies``: the three-policy grid instead — the default estimators at each size with
U = 8 updates a batch (recompute, 8 epochs), bypass at lag 16 (4 minibatches × 2 epochs), and rollout at lag 8 with
the correction at the current policy (4 epochs): U ≤ 8 and lag ≤ 16. ``--hidden``: runs with hidden variables instead —
the default estimators in expected mode with a mixture of experts (its router error drawn per sequence, replay off, R2
and R3 with U = 4; drawn per token, D = 2) and with version switches (fixed; drawn up to η = 4 with the rollout anchor
and head stamps; AReaL's log-linear π_prox), at T = 4 to 10.
"""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = "naive,tok_is,tok_tis,tok_mis,seq_is,seq_tis,seq_mis,geo_rs"
CHILD = """
import json, sys, time
from pathlib import Path
from toylab import make_toy
from toylab.catalogue.estimators import ESTIMATORS
from toylab.engine.sampler import DEFAULT_SAMPLER
from toylab.training import cost
from toylab.catalogue.updates import Update
from toylab.engine.experts import Experts
from toylab.engine.versions import Versions
from toylab.training.loop import TrainingConfig, train, trained_ids

def rss(field):
    line = next(l for l in Path("/proc/self/status").read_text().splitlines() if l.startswith(field))
    return int(line.split()[1]) * 1024

point = json.loads(sys.argv[1])
ids = list(ESTIMATORS) if point["estimators"] == "all" else point["estimators"].split(",")
update = point.get("update", {})
hidden = point.get("hidden", {})
config = TrainingConfig(steps=point["steps"], mode=point["mode"], N=point["N"], runs=point["runs"],
                        update=Update(**{k: v for k, v in update.items() if k != "lag"}), lag=update.get("lag", 0),
                        experts=Experts(**hidden["experts"]) if "experts" in hidden else None,
                        replay=hidden.get("replay", "off"), versions=Versions(**hidden.get("versions", {})))
ids = trained_ids(dict.fromkeys(ids, {}), config.mode, config.N, config.weights_only)
selection = {id: {} for id in ids}
toy = make_toy(point["T"], point["V"])
if sys.argv[2] == "memory":
    before = rss("VmRSS")
    train(toy, selection, "none", config)
    print(json.dumps({"predicted_mb": cost.run_bytes(point["T"], point["V"], config, ids) / 1e6,
                      "measured_mb": (rss("VmHWM") - before) / 1e6}))
    sys.exit()
start = time.perf_counter()
line = cost.probe((point["T"], point["V"], 0.3, 0, DEFAULT_SAMPLER), selection, "none", config)
probe_seconds = time.perf_counter() - start
wall, cpu = time.perf_counter(), time.thread_time()
train(toy, selection, "none", config)
cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
print(json.dumps({"trained": len(ids), "predicted_s": line.seconds(point["T"], point["V"], config),
                  "predicted_wall_s": line.wall_seconds(point["T"], point["V"], config),
                  "cpu_s": cpu, "wall_s": wall, "probe_s": probe_seconds}))
"""


def grid(quick, mode=None):
    """The points: every size in both modes (or in ``mode``), with the default estimators and with all of them."""
    expected = [(6, 4, 200), (8, 4, 100), (10, 4, 20), (11, 4, 5), (16, 2, 100), (20, 2, 10), (8, 5, 20), (7, 8, 5),
                (12, 3, 10)]
    sampled = [(6, 4, 64, 8, 100), (6, 4, 2, 64, 100), (6, 4, 1024, 8, 50), (6, 4, 4096, 32, 5), (16, 2, 2, 64, 50),
               (16, 2, 256, 16, 20), (10, 4, 64, 1, 200), (6, 8, 512, 64, 10)]
    points = []
    for estimators in (DEFAULT, "all"):
        scale = 1 if estimators == DEFAULT else 10
        for T, V, steps in expected:
            points.append({"mode": "expected", "T": T, "V": V, "steps": max(2, steps // scale), "N": 64, "runs": 1,
                           "estimators": estimators})
        for T, V, N, runs, steps in sampled:
            points.append({"mode": "sampled", "T": T, "V": V, "steps": max(2, steps // scale), "N": N, "runs": runs,
                           "estimators": estimators})
    points = [point for point in points if mode in (None, point["mode"])]
    return points[::4] if quick else points


UPDATES = ({"anchor": "recompute", "epochs": 8}, {"anchor": "bypass", "minibatches": 4, "epochs": 2, "lag": 16},
           {"anchor": "rollout", "epochs": 4, "weights_at": "current", "lag": 8})


def policy_grid(quick, mode=None):
    """The three-policy points: the default estimators at each size of the grid, under each of UPDATES."""
    sizes = [point for point in grid(False, mode) if point["estimators"] == DEFAULT]
    points = [point | {"update": update} for point in sizes for update in UPDATES
              if point["N"] >= update.get("minibatches", 1)]                # N sequences make at most N minibatches
    return points[::4] if quick else points


HIDDEN = ({"experts": {}, "replay": "off"}, {"experts": {}, "replay": "R2", "epochs": 4},
          {"experts": {}, "replay": "R3", "epochs": 4}, {"experts": {"draw": "token", "draws": 2}, "replay": "R3"},
          {"versions": {"switch": "fixed", "at": 2}, "lag": 2},
          {"versions": {"switch": "drawn", "stamp": "head"}, "lag": 4, "anchor": "rollout"},
          {"versions": {"switch": "fixed", "at": 2, "prox": "loglinear"}, "lag": 2})


def hidden_grid(quick, mode=None):
    """The hidden-variable points: the default estimators in expected mode at T = 4, 6, 8 and 10 (V = 4; per-token
    router draws only up to T = 6, whose sums enumerate (D·V)**T), under each of HIDDEN."""
    points = []
    for T, steps in ((4, 100), (6, 100), (8, 30), (10, 5)):
        for hidden in HIDDEN:
            if "draw" in hidden.get("experts", {}) and T > 6:
                continue
            update = {key: hidden[key] for key in ("epochs", "lag", "anchor") if key in hidden}
            points.append({"mode": "expected", "T": T, "V": 4, "steps": steps, "N": 64, "runs": 1,
                           "estimators": DEFAULT, "update": update,
                           "hidden": {key: hidden[key] for key in ("experts", "replay", "versions") if key in hidden}})
    return points[::4] if quick else points


def measure(point):
    """The point's time (after its probe) and its memory (alone), each in a fresh process."""
    for what in ("time", "memory"):
        done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(point), what], cwd=ROOT, capture_output=True,
                              text=True, timeout=1800)
        if done.returncode:
            raise RuntimeError(done.stderr.strip().splitlines()[-1])
        point = point | json.loads(done.stdout)
    return point


def label(point):
    size = f"T={point['T']} V={point['V']}"
    draws = f" N={point['N']} runs={point['runs']}" if point["mode"] == "sampled" else ""
    which = "all" if point["estimators"] == "all" else "default"
    update = point.get("update")
    policies = "" if update is None else " · " + " ".join(f"{key} {value}" for key, value in update.items())
    hidden = point.get("hidden")
    hidden = "" if not hidden else " · " + " ".join(f"{key} {value}" for key, value in hidden.items())
    return f"{point['mode']} {size}{draws} K={point['steps']}, {which} ({point['trained']}){policies}{hidden}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the rows to this file")
    parser.add_argument("--quick", action="store_true", help="every fourth point")
    parser.add_argument("--mode", choices=("expected", "sampled"), help="only this mode's points")
    parser.add_argument("--policies", action="store_true", help="the three-policy grid: U ≤ 8, lag ≤ 16")
    parser.add_argument("--hidden", action="store_true", help="runs with hidden variables: routing and versions")
    arguments = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} at the start", flush=True)
    rows = []
    print("| run | predicted CPU s | measured | ratio | predicted wall s | measured | ratio | probe s | predicted MB "
          "| measured MB | ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    chosen = hidden_grid if arguments.hidden else policy_grid if arguments.policies else grid
    for point in chosen(arguments.quick, arguments.mode):
        row = measure(point)
        rows.append(row)
        print(f"| {label(row)} | {row['predicted_s']:.3g} | {row['cpu_s']:.3g} | {row['predicted_s'] / row['cpu_s']:.2f} "
              f"| {row['predicted_wall_s']:.3g} | {row['wall_s']:.3g} | {row['predicted_wall_s'] / row['wall_s']:.2f} "
              f"| {row['probe_s']:.2f} | {row['predicted_mb']:.3g} | {row['measured_mb']:.3g} "
              f"| {row['predicted_mb'] / max(row['measured_mb'], 0.1):.2f} |", flush=True)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    worst_time = max(max(r["predicted_s"] / r["cpu_s"], r["cpu_s"] / r["predicted_s"]) for r in rows)
    worst_wall = max(max(r["predicted_wall_s"] / r["wall_s"], r["wall_s"] / r["predicted_wall_s"]) for r in rows)
    large = [r for r in rows if r["measured_mb"] >= 10]
    worst_memory = max(max(r["predicted_mb"] / r["measured_mb"], r["measured_mb"] / r["predicted_mb"]) for r in large)
    print(f"worst factor: CPU seconds {worst_time:.2f}, wall seconds {worst_wall:.2f} over {len(rows)} runs; memory "
          f"{worst_memory:.2f} over the {len(large)} runs that add 10 MB or more")
    if arguments.json:
        Path(arguments.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
