"""At 1280×720, in the light and the dark theme, without and with presentation mode: every view a tab opens on request
(a toggle in the link: the KL view, the seeds views, the staleness view and its seeds, the one-step view, Monte Carlo
on request, …) and the groups a link opens (Training's three policies with the routing and version controls, its
reference with the KL chart) show no text cut off and the tab's first chart in view (``tests/screen_fit.py``).

A sweep over the link's opt-in toggles, so a view added later under one is measured too; the tabs and their
expanders: test_fits_the_screen.py; the lessons: test_lessons_fit_the_screen.py.
"""

from urllib.parse import quote

import pytest
from screen_fit import SCREEN, first_chart_in_view, measure

from tests.browser import wait_for_app
from toylab.state.query import ESTIMATORS_TAB, TRAINING_TAB, VIEW_PARAMETERS

pytestmark = pytest.mark.browser
MODES = [("normal", "light"), ("normal", "dark"), ("present", "light"), ("present", "dark")]
NOT_A_VIEW = {"train_mask_stale",       # a control of the three policies' group: measured with the group's links
              "kl_frameworks"}          # rows of the KL view: measured with it (GROUPS)
TOGGLES = [(parameter.tab, f"{name}=1" + "".join(f"&{need}={VIEW_PARAMETERS[need].to_url(value)}"
                                                 for need, value in parameter.needs.items()))
           for name, parameter in VIEW_PARAMETERS.items()
           if parameter.default is False and parameter.tab and name not in NOT_A_VIEW]
GROUPS = [(ESTIMATORS_TAB, "kl_view=1&kl_frameworks=1"),           # the KL view with every framework's row
          (TRAINING_TAB, "train_replay_preset=verl:R3&train_version_preset=slime:partial_rollout&train_switch=fixed"),
          (TRAINING_TAB, "train_replay=R2&train_switch=drawn&train_lag=2"),     # the policies' charts, own controls
          (TRAINING_TAB, "train_kl=k3.loss&train_ref_distance=1")]               # the reference and its KL chart
LINKS = TOGGLES + GROUPS


def test_the_sweep_opens_every_new_view():
    assert {query.split("=")[0] for _, query in TOGGLES} >= {"kl_view", "est_seeds", "train_seeds", "staleness",
                                                             "staleness_seeds", "sga"}


@pytest.mark.parametrize("mode, scheme", MODES, ids=[f"{mode}-{scheme}" for mode, scheme in MODES])
def test_every_view_on_request_fits_with_its_first_chart_in_view(app, mode, scheme):
    url, browser = app
    context = browser.new_context(viewport=SCREEN, color_scheme=scheme)
    page = context.new_page()
    found = []
    for tab, query in LINKS:
        page.goto(f"{url}/?{'present=1&' if mode == 'present' else ''}tab={quote(tab)}&{query}")
        wait_for_app(page, 300_000)                   # a seeds view trains 30 toys
        measured = measure(page)
        if not first_chart_in_view(measured):
            found.append(f"{tab} {query}: the first chart starts at {measured['first_chart_top']:.0f} px")
        found += [f"{tab} {query}: {problem}" for problem in measured["problems"]]
    assert not found, "\n".join(found)
    context.close()
