"""The page in headless Chromium: renders, every tab opens, the URL follows the controls and opens views.

Uses the harness in tests/browser.py. The re-render times of a slider step (default toy, and T=10 V=4) are printed
(pytest -s) and kept as test properties. Presentation mode, themes, zoom, Back and Forward, and the README's
screenshots: test_presentation_browser.py.
"""

import hashlib
import time
from pathlib import Path

import pytest
from framework_dumps import toy_batch, write_nemo

from tests.browser import (
    GZIP_MAY_NOT_SHRINK_BYTES,
    file_input,
    frontend_assets,
    wait_for_app,
)
from toylab_app.sidebar import GROUPS, picker_order

pytestmark = pytest.mark.browser
EXAMPLE_LOG = Path(__file__).resolve().parents[2] / "examples" / "rollouts_per_token.csv.gz"
TABS = {"Estimators": 1, "Ratios": 3, "Error vs batch size": 1, "Threshold sweep": 1, "Mismatch sweep": 1,
        "Sequence length": 2, "Training": 5, "Your run": 0, "Lessons": 0}

_DONE_JS = """before => {
    const status = document.querySelector('[data-testid="stStatusWidget"]');
    const busy = !!status && status.getClientRects().length > 0 && /Running/i.test(status.innerText || "");
    const tables = document.querySelectorAll('[data-testid="stDataFrame"]');   // the last one is drawn last
    const cells = tables.length ? [...tables[tables.length - 1].querySelectorAll('td[role=gridcell]')] : [];
    const text = cells.map(c => c.textContent).join("|");
    return !busy && text.length > 0 && text !== before;
}"""


def open_page(app, query="", table=True):
    url, browser = app
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    page.goto(f"{url}/?{query}" if query else url)
    wait_for_app(page)
    if table:
        page.wait_for_function(_DONE_JS, arg="", timeout=30_000)   # the table has drawn its cells
    return page


def table_text(page):
    """The text of the last table on the page (the Training tab has two; its last is computed last)."""
    return "|".join(page.locator('[data-testid="stDataFrame"]').last.locator("td[role=gridcell]").all_text_contents())


def rendered_charts(page):
    return page.locator('[data-testid="stVegaLiteChart"]').filter(
        has=page.locator("canvas, svg.marks")).count()


def assert_no_exception(page):
    assert page.locator('[data-testid="stException"]').count() == 0


def step_mismatch(page):
    """Press → on the mismatch slider (one step of 0.01); return seconds until the new table is shown."""
    before = table_text(page)
    slider = page.get_by_role("slider", name="mismatch")
    slider.focus()
    start = time.perf_counter()
    slider.press("ArrowRight")
    page.wait_for_function(_DONE_JS, arg=before, polling="raf", timeout=30_000)
    return time.perf_counter() - start


def test_default_view_renders(app):
    page = open_page(app)
    assert_no_exception(page)
    assert page.locator('[data-testid="stMetric"]').count() == 8            # M, J, E_μ[r], ‖∇J‖, KL, χ², ESS, E_μs[W]
    assert "4,096" in page.locator('[data-testid="stMetric"]').first.inner_text()
    assert "tok_tis" in table_text(page) and "seq_is" in table_text(page)
    page.wait_for_function("() => document.querySelectorAll('[data-testid=\"stVegaLiteChart\"] canvas, "
                           "[data-testid=\"stVegaLiteChart\"] svg.marks').length > 0")
    assert rendered_charts(page) >= 1
    page.close()


_FETCHED_JS = """async path => {
    const response = await fetch(path, {cache: "no-store"});
    const digest = await crypto.subtle.digest("SHA-256", await response.arrayBuffer());
    const hex = [...new Uint8Array(digest)].map(byte => byte.toString(16).padStart(2, "0")).join("");
    return [response.status, response.headers.get("content-encoding"), hex];
}"""


def test_a_second_browser_gets_streamlit_s_own_frontend_gzipped_from_memory(app):
    """After a run of the page the server serves Streamlit's frontend from memory (toylab_app/internals.py): a new
    browser draws the page, and every file index.html names arrives with the bytes of the file on disk."""
    open_page(app).close()
    page = open_page(app)
    assert_no_exception(page)
    static, assets = frontend_assets()
    assert len(assets) > 20
    for path in assets:
        data = (static / path).read_bytes()
        status, encoding, digest = page.evaluate(_FETCHED_JS, path)
        assert (status, digest) == (200, hashlib.sha256(data).hexdigest()), path
        assert encoding == "gzip" if len(data) > GZIP_MAY_NOT_SHRINK_BYTES else encoding in (None, "gzip"), path
    page.close()


def test_every_tab_opens_and_renders_its_charts(app):
    page = open_page(app)
    for label, charts in TABS.items():
        page.get_by_role("tab", name=label).click()
        wait_for_app(page)
        panel = page.get_by_role("tabpanel", name=label)
        if charts:
            panel.locator("canvas, svg.marks").first.wait_for(timeout=60_000)
        assert panel.locator('[data-testid="stVegaLiteChart"]').count() == charts
        assert_no_exception(page)
        assert label == "Estimators" or "tab=" + label.split()[0] in page.url     # the default tab stays implicit
    page.close()


def test_a_lesson_button_opens_its_setting_and_tab(app):
    page = open_page(app, "tab=Lessons", table=False)
    button = page.get_by_role("button", name="Show me → Sequence length").first
    button.wait_for(timeout=30_000)
    button.click()
    wait_for_app(page)
    assert page.get_by_role("tab", name="Sequence length").get_attribute("aria-selected") == "true"
    assert "tab=Sequence" in page.url
    page.get_by_role("tabpanel", name="Sequence length").locator("canvas, svg.marks").first.wait_for(timeout=60_000)
    assert_no_exception(page)
    page.close()


@pytest.mark.parametrize("query, name", [("", "default toy"), ("T=10", "T=10, V=4"),
                                         ("tab=Training", "Training tab, default toy")])
def test_slider_updates_url_and_table(app, query, name, record_property):
    page = open_page(app, query)
    seconds = [step_mismatch(page) for _ in range(3)]
    page.wait_for_function("() => location.search.includes('mismatch=0.33')")   # written as the run ends
    assert_no_exception(page)
    print(f"\nre-render after a mismatch step, {name}: " + ", ".join(f"{s * 1000:.0f} ms" for s in seconds))
    record_property(f"rerender_ms {name}", [round(s * 1000) for s in seconds])
    page.close()


def test_shared_link_opens_that_view(app):
    page = open_page(app, "T=5&V=3&mismatch=0.9&est=naive,seq_is,seq_mis&seq_mis.C=3&N=256&tab=Ratios",
                     table=False)
    assert_no_exception(page)
    assert page.locator('[data-testid="stAlert"]').count() == 0
    assert f"{3**5:,}" in page.locator('[data-testid="stMetric"]').first.inner_text()
    assert page.get_by_role("slider", name="mismatch").get_attribute("aria-valuetext") == "0.90"
    assert page.get_by_role("tab", name="Ratios").get_attribute("aria-selected") == "true"
    page.get_by_role("tabpanel", name="Ratios").locator("canvas, svg.marks").first.wait_for(timeout=30_000)
    page.get_by_role("tab", name="Estimators").click()
    wait_for_app(page)
    page.wait_for_function(_DONE_JS, arg="", timeout=30_000)
    text = table_text(page)
    assert "seq_mis" in text and "C=3" in text and "tok_tis" not in text
    page.close()


def test_per_position_toggle_is_in_the_link(app):
    page = open_page(app, "tab=Ratios&ratio_panels=true", table=False)
    assert_no_exception(page)
    assert page.locator('[data-testid="stAlert"]').count() == 0
    assert page.get_by_role("switch", name="one panel per position").is_checked()
    page.get_by_role("tabpanel", name="Ratios").locator("canvas, svg.marks").first.wait_for(timeout=30_000)
    page.close()


def test_bad_link_shows_notices_and_no_exception(app):
    page = open_page(app, "T=banana&mismatch=9&est=naive,bogus")
    assert_no_exception(page)
    alerts = page.locator('[data-testid="stAlert"]').all_inner_texts()
    assert any("banana" in a for a in alerts) and any("bogus" in a for a in alerts)
    assert "4,096" in page.locator('[data-testid="stMetric"]').first.inner_text()
    assert "T=banana" not in page.url
    page.close()


def test_link_over_the_limit_is_refused_with_a_suggestion(app):
    page = open_page(app, "T=16&V=8")
    assert_no_exception(page)
    alerts = " ".join(page.locator('[data-testid="stAlert"]').all_inner_texts())
    assert "fewer tokens" in alerts and "smaller vocabulary" in alerts
    page.close()


def test_your_run_upload_shows_the_statistics_and_charts(app):
    page = open_page(app, "tab=Your%20run", table=False)
    panel = page.get_by_role("tabpanel", name="Your run")
    file_input(panel, "Rollout log").set_input_files(str(EXAMPLE_LOG))
    panel.locator('[data-testid="stVegaLiteChart"]').nth(4).locator("canvas, svg.marks").first.wait_for(timeout=60_000)
    wait_for_app(page)
    assert_no_exception(page)
    assert panel.locator('[data-testid="stVegaLiteChart"]').count() == 5
    assert rendered_charts(page) == 5
    metrics = [text.split() for text in panel.locator('[data-testid="stMetric"]').all_inner_texts()]
    assert ["k1", "=", "mean(log", "μ", "−", "log", "π)", "0.172", "±", "0.0046", "standard", "error"] in metrics
    assert "At mismatch 0.5032 ± 0.0029" in panel.inner_text()
    assert "What each estimator would do to these sequences" in panel.inner_text()
    cells = "|".join(panel.locator('[data-testid="stDataFrame"] td[role=gridcell]').all_text_contents())
    assert "tok_tis" in cells and "seq_mis" in cells                      # the estimator table has drawn
    page.close()


def test_a_run_of_several_files_shows_its_step_chart(app, tmp_path):
    """The run's uploader: two step files, then a third dropped on their own (the browser adds it to the first two,
    whose bytes the tab holds), then one removed; a log on the log's uploader then replaces the run (and lets its
    files go: a file dropped on the run's uploader next is a run of its own, and the tab says the others are gone)."""
    paths = [write_nemo(tmp_path, step, toy_batch(10, seed=step)) for step in (1, 2, 3)]
    page = open_page(app, "tab=Your%20run", table=False)
    panel = page.get_by_role("tabpanel", name="Your run")

    def shown(text):
        page.wait_for_timeout(500)
        wait_for_app(page)
        panel.get_by_text(text).first.wait_for(timeout=60_000)
        assert_no_exception(page)

    run_input = file_input(panel, "A run: its step files")
    run_input.set_input_files([str(path) for path in paths[:2]])
    shown("A run of 2 steps")
    run_input.set_input_files(str(paths[2]))
    shown("A run of 3 steps")
    panel.locator('[data-testid="stVegaLiteChart"]').nth(1).locator("canvas, svg.marks").first.wait_for(timeout=60_000)
    assert rendered_charts(page) == 2                    # the metrics against step, and the estimators' shares
    widths = [box["width"] for box in (chart.bounding_box() for chart in
                                       panel.locator('[data-testid="stVegaLiteChart"]').all())]
    assert min(widths) > 300                              # drawn, not a chart of no width
    panel.get_by_text("Files and columns").click()       # with a run in view the uploaders are folded away
    panel.get_by_role("button", name=f"Remove {paths[1].name}").click()
    shown("A run of 2 steps")
    assert "A run of 3 steps" not in panel.inner_text()
    file_input(panel, "Rollout log").set_input_files(str(EXAMPLE_LOG))
    shown("k1 = mean(log μ − log π)")
    assert "A run of" not in panel.inner_text()
    run_input.set_input_files(str(paths[1]))              # the two left in the run's uploader were let go meanwhile
    shown("A run of 1 step")
    assert "2 of the files in the run's uploader were let go" in panel.inner_text()
    page.close()


def test_bad_view_parameters_are_explained_and_leave_the_address(app):
    page = open_page(app, "tab=Nonexistent&ratio_panels=maybe&T=4&T=5")
    assert_no_exception(page)
    alerts = " ".join(page.locator('[data-testid="stAlert"]').all_inner_texts())
    assert "'Nonexistent'" in alerts and "'maybe'" in alerts and "given more than once" in alerts
    page.wait_for_function("() => !location.search.includes('tab') && !location.search.includes('ratio_panels')")
    assert page.url.endswith("/?T=5")
    assert page.get_by_role("tab", name="Estimators").get_attribute("aria-selected") == "true"
    page.close()


def test_a_closed_tabs_toggle_comes_back_with_its_tab(app):
    page = open_page(app, "ratio_panels=true")
    assert "ratio_panels" not in page.url                      # the Ratios tab is not open: not in the address
    page.get_by_role("tab", name="Ratios").click()
    wait_for_app(page)
    assert page.get_by_role("switch", name="one panel per position").is_checked()
    page.wait_for_function("() => location.search.includes('ratio_panels=1')")
    assert "tab=Ratios" in page.url
    page.close()


def test_an_undefined_cosine_is_a_dash_not_none(app):
    page = open_page(app, "est=trm&trm.eps=0.01")
    assert_no_exception(page)
    cells = page.locator('[data-testid="stDataFrame"] td[role=gridcell]').all_text_contents()
    assert "—" in cells and "None" not in cells and "nan" not in " ".join(cells).lower()
    assert page.get_by_text("every sequence is masked").count() == 1
    page.close()


def test_my_framework_is_in_the_link_and_orders_the_picker(app):
    page = open_page(app, "framework=trl")
    assert "framework=trl" in page.url
    page.get_by_text(GROUPS["estimators"]).click()     # the group's controls are built once it is open
    page.get_by_role("combobox", name="my framework").click()
    page.get_by_role("option", name="verl", exact=True).click()
    page.wait_for_function("() => location.search.includes('framework=verl')")
    wait_for_app(page)
    page.get_by_role("combobox", name="estimators").click()
    options = page.get_by_role("option")
    options.first.wait_for()
    assert options.first.inner_text().startswith("verl:")
    page.keyboard.type("trl")                          # a framework's name filters its presets, to select them all
    matches = [id for id in picker_order("verl") if "trl" in id]
    page.wait_for_function("n => document.querySelectorAll('[role=option]').length === n", arg=len(matches) + 1)
    assert page.get_by_role("option").all_inner_texts() == [f"Select {len(matches)} matches", *matches]
    assert_no_exception(page)
    page.close()


def test_the_csv_download_is_the_table_at_full_precision(app):
    """The CSV is made on the click (a deferred download), and the click starts no run (``on_click="ignore"``). A
    click that also started a run lost its file now and then on CI's busy machine: the button spun, disabled, for the
    frontend's 180 s, because Streamlit clears its outgoing queue when a run starts, and the kinds of message it keeps
    do not include the deferred file's answer (runtime/forward_msg_queue.py ``ForwardMsgQueue.clear``, called by
    runtime/app_session.py ``AppSession._clear_queue`` on SCRIPT_STARTED, Streamlit 1.66 and 1.67)."""
    page = open_page(app)
    with page.expect_download(timeout=60_000) as download:
        page.get_by_role("button", name="Download CSV").click()
    lines = Path(download.value.path()).read_text().splitlines()
    assert lines[0].startswith("estimator,label,params,rel_bias") and lines[1].startswith("on_policy,")
    page.close()
