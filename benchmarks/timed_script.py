"""Run a Streamlit script under ``streamlit run`` and log how long each of its runs took on the server.

    TOYLAB_TIMED_SCRIPT=toylab_app/script/streamlit_app.py TOYLAB_TIMED_LOG=/tmp/runs.jsonl \
        streamlit run benchmarks/timed_script.py

Each run of the script appends one JSON line {"start": unix seconds, "seconds": duration, "outcome": ...,
"profile": path or null} to TOYLAB_TIMED_LOG; the outcome is "completed" or the exception that ended the run
(Streamlit stops and reruns a script by raising inside it). With TOYLAB_PROFILE_DIR set, each run is also
profiled with cProfile into that folder, one .prof file per run. The timed script itself is unchanged (it may call
st.set_page_config: Streamlit accepts it anywhere in a run), so the page is the page a user sees — unless
TOYLAB_TIMED_WITHOUT_CHARTS is set: then every chart of toylab's page (``toylab_app.chart_element.draw``) is an empty
placeholder, one element in its place, so that a browser's time for the page's other elements can be told apart.
"""

import cProfile
import json
import os
import runpy
import sys
import time
from pathlib import Path

script = Path(os.environ["TOYLAB_TIMED_SCRIPT"]).resolve()
if str(script.parent) not in sys.path:
    sys.path.insert(0, str(script.parent))         # as `streamlit run` does for the script's own folder
if os.environ.get("TOYLAB_TIMED_WITHOUT_CHARTS"):
    from toylab_app import chart_element

    chart_element.draw = lambda where, chart, width="stretch": where.empty()
profile_dir = os.environ.get("TOYLAB_PROFILE_DIR")
profiler = cProfile.Profile() if profile_dir else None

outcome = "completed"
profile_path = None
started = time.time()
start = time.perf_counter()
try:
    if profiler:
        profiler.enable()
    runpy.run_path(str(script), run_name="__main__")
except BaseException as exception:
    outcome = type(exception).__name__
    raise
finally:
    seconds = time.perf_counter() - start
    if profiler:
        profiler.disable()
        profile_path = str(Path(profile_dir) / f"run-{time.time_ns()}.prof")
        profiler.dump_stats(profile_path)
    with open(os.environ["TOYLAB_TIMED_LOG"], "a") as log:
        log.write(json.dumps({"start": started, "seconds": seconds, "outcome": outcome,
                              "profile": profile_path}) + "\n")
