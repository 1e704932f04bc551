"""The page as a screen-share shows it, in headless Chromium at 1280×720 (tests/browser.py's harness).

Presentation mode (``present=1``), in the light and the dark theme, and with every sampler control set (the longest
header line): every tab opens with the sidebar collapsed, a one-line header, its first chart wholly in view, nothing
wider than the page or its column (no sideways scroll, no table scrolling sideways), every chart text 16 px or more at
4.5:1 contrast or more against the page, and no warning in the browser's console. Without presentation mode, at
browser zoom 125 %, no header number or tab name is cut. The theme switch is in the page's menu. Back and Forward
return to the views shown before. Set
TOYLAB_SCREENSHOT=1 to save the screenshots in docs/ (1280×720, presentation mode).
"""

import os
from pathlib import Path

import pytest

from tests.browser import (
    file_input,
    wait_for_app,
)
from toylab.lessons.lesson import settings as lesson_settings
from toylab.lessons.lesson import view_of
from toylab.lessons.tour import LESSONS
from toylab.state.query import TAB_LABELS, VIEW_DEFAULTS, to_query, view_query

pytestmark = pytest.mark.browser
DOCS = Path(__file__).resolve().parents[2] / "docs"
EXAMPLE_LOG = DOCS.parent / "examples" / "rollouts_per_token.csv.gz"
SCREEN = {"width": 1280, "height": 720}
CHART_TABS = [label for label in TAB_LABELS if label not in ("Your run", "Lessons")]
SMALLEST_TEXT, LEAST_CONTRAST = 16, 4.5
SAMPLER = "&top_p=0.95&top_k=3&temperature=0.75&precision=bf16&N=100000"   # the longest header: every sampler field
IGNORED_CONSOLE = ("Failed to load resource",)    # the page icon's font file, fetched from the internet (offline here)

CHARTS_DRAWN_JS = """() => {       /* the header drawn (not a skeleton between two runs) and every visible chart drawn */
    const header = document.querySelector('.st-key-toylab_header');
    return !!header && !header.querySelector('[data-testid="stSkeleton"]') && !!header.innerText.trim()
        && [...document.querySelectorAll('[data-testid="stVegaLiteChart"]')].filter(e => e.checkVisibility())
            .every(e => e.querySelector('svg.marks, canvas'));
}"""

# What a viewer sees of the open tab, in page coordinates (the main area scrolled to its top).
LAYOUT_JS = """() => {
    const main = document.querySelector('[data-testid="stMain"]');
    const top = main.getBoundingClientRect().top - main.scrollTop;
    const panel = [...document.querySelectorAll('[role="tabpanel"]')].find(p => p.getClientRects().length);
    const chart = panel.querySelector('[data-testid="stVegaLiteChart"]');
    const luminance = colour => {
        const [r, g, b] = colour.match(/[\\d.]+/g).map(Number).map(v => v / 255)
            .map(v => v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4);
        return 0.2126 * r + 0.7152 * g + 0.0722 * b;
    };
    const background = luminance(getComputedStyle(document.querySelector('[data-testid="stApp"]')).backgroundColor);
    const texts = [...panel.querySelectorAll('[data-testid="stVegaLiteChart"] svg text')]
        .filter(t => t.textContent.trim() && t.getClientRects().length)
        .map(t => {
            const style = getComputedStyle(t), colour = luminance(style.fill);
            return {text: t.textContent, size: parseFloat(t.getAttribute('font-size') || style.fontSize),
                    contrast: (Math.max(colour, background) + 0.05) / (Math.min(colour, background) + 0.05)};
        });
    const tooWide = [...panel.querySelectorAll('[data-testid="stVegaLiteChart"], [data-testid="stDataFrame"]')]
        .filter(element => {
            const inner = element.dataset.testid === 'stDataFrame' ? element.querySelector('.dvn-scroller')
                                                                    : element.querySelector('svg.marks, canvas');
            return inner && (inner.scrollWidth > inner.clientWidth + 1
                             || inner.getBoundingClientRect().right > element.getBoundingClientRect().right + 1);
        }).map(element => element.dataset.testid);
    const sidebar = document.querySelector('[data-testid="stSidebar"]').getBoundingClientRect();
    const header = document.querySelector('.st-key-toylab_header');
    return {
        chartBottom: chart ? chart.getBoundingClientRect().bottom - top : null,
        sideways: Math.max(main.scrollWidth - main.clientWidth,
                           document.documentElement.scrollWidth - document.documentElement.clientWidth),
        tooWide, texts, sidebarShown: sidebar.right > 1,
        headerHeight: header ? header.getBoundingClientRect().height : null,
        viewportHeight: innerHeight,
    };
}"""

# Cut text: an element narrower than its text (an ellipsis), or a tab beyond the visible tab list.
CUT_JS = """() => {
    const cut = [...document.querySelectorAll('[data-testid="stMetricValue"] > div, [data-testid="stMetricLabel"] p')]
        .filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.textContent);
    const list = document.querySelector('[data-testid="stTabs"] [role="tablist"]').getBoundingClientRect();
    for (const tab of document.querySelectorAll('[data-testid="stTabs"] [role="tab"]')) {
        const label = tab.querySelector('p') || tab, box = tab.getBoundingClientRect();
        if (label.scrollWidth > label.clientWidth + 1 || box.right > list.right + 1 || box.left < list.left - 1)
            cut.push(tab.textContent);
    }
    return cut;
}"""


def open_page(app, query="", scheme="light", viewport=SCREEN, zoom=1.0):
    """A new session at ``query`` in its own browser context (colour scheme, viewport, zoom), settled; the page
    and the console warnings it logs."""
    url, browser = app
    context = browser.new_context(viewport=viewport, device_scale_factor=zoom, color_scheme=scheme)
    page = context.new_page()
    warnings = []
    page.on("console", lambda message: warnings.append(message.text) if message.type in ("warning", "error")
            and not message.text.startswith(IGNORED_CONSOLE) else None)
    page.goto(f"{url}/?{query}" if query else url)
    settle(page)
    return page, warnings


def settle(page):
    wait_for_app(page)
    page.wait_for_function(CHARTS_DRAWN_JS, timeout=60_000)


def open_tab(page, label):
    page.get_by_role("tab", name=label, exact=True).click()
    settle(page)


def lesson_link(lesson):
    return "&".join(f"{name}={value}" for name, value in
                    (to_query(lesson_settings(lesson)) | view_query(VIEW_DEFAULTS | view_of(lesson))).items())


@pytest.mark.parametrize("scheme, link", [("light", ""), ("dark", ""), ("light", SAMPLER)],
                         ids=["light", "dark", "light-sampler"])
def test_every_tab_fits_a_1280_by_720_screen_share_in_presentation_mode(app, scheme, link):
    page, warnings = open_page(app, "present=1" + link, scheme)
    for label in TAB_LABELS:
        open_tab(page, label)
        layout = page.evaluate(LAYOUT_JS)
        assert not layout["sidebarShown"], label
        assert layout["headerHeight"] < 40, (label, layout["headerHeight"])     # one line
        assert layout["sideways"] <= 0 and not layout["tooWide"], (label, layout["tooWide"])
        if label in CHART_TABS:
            assert layout["chartBottom"] <= layout["viewportHeight"], label
        small = [text for text in layout["texts"] if text["size"] < SMALLEST_TEXT]
        faint = [text for text in layout["texts"] if text["contrast"] < LEAST_CONTRAST]
        assert not small and not faint, (label, small[:3], faint[:3])
        assert label not in CHART_TABS or layout["texts"], label
    assert not warnings, warnings[:5]
    page.context.close()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_lessons_and_sampled_training_draw_without_console_warnings(app, scheme):
    for query in ["present=1&tab=Training&train_mode=sampled", *(lesson_link(lesson) for lesson in LESSONS)]:
        page, warnings = open_page(app, query, scheme)
        assert page.locator('[data-testid="stException"]').count() == 0, query
        assert not warnings, (query, warnings[:3])
        page.context.close()


def test_sampled_training_has_a_legend(app):
    page, _ = open_page(app, "present=1&tab=Training&train_mode=sampled")
    first = page.get_by_role("tabpanel", name="Training").locator('[data-testid="stVegaLiteChart"]').first
    legend = first.locator("svg g.mark-group.role-legend")
    assert legend.count() == 1 and "naive" in legend.text_content()
    page.context.close()


def test_at_browser_zoom_125_no_header_number_or_tab_name_is_cut(app):
    for label in ("Estimators", "Training"):
        page, _ = open_page(app, "" if label == "Estimators" else f"tab={label}",
                            viewport={"width": 1024, "height": 576}, zoom=1.25)
        assert page.locator('[data-testid="stMetric"]').count() == 8        # the header's eight numbers
        assert page.evaluate(CUT_JS) == [], label
        page.context.close()


def test_the_theme_switch_is_in_the_menu_and_charts_follow_it(app):
    page, warnings = open_page(app, "present=1", "light")
    light = page.evaluate(LAYOUT_JS)["texts"]
    page.locator('[data-testid="stMainMenuButton"]').click()
    page.get_by_role("menuitemradio", name="Dark").click()
    page.wait_for_function("""() => { const c = getComputedStyle(document.querySelector('[data-testid="stApp"]'))
        .backgroundColor.match(/\\d+/g).map(Number); return c[0] + c[1] + c[2] < 150; }""")
    dark = page.evaluate(LAYOUT_JS)["texts"]
    assert len(dark) == len(light) and min(text["contrast"] for text in dark) >= LEAST_CONTRAST
    assert not warnings
    page.context.close()


def test_back_and_forward_return_to_the_views_shown_before(app):
    page, _ = open_page(app)
    slider = page.get_by_role("slider", name="mismatch")

    def view():
        selected = page.locator('[data-testid="stTabs"] [role="tab"][aria-selected="true"]').inner_text().strip()
        return selected, slider.get_attribute("aria-valuetext")

    shown = [view()]
    slider.focus()
    slider.press("ArrowRight")
    settle(page)
    page.wait_for_function("() => location.search.includes('mismatch=0.31')")
    shown.append(view())
    open_tab(page, "Training")
    shown.append(view())
    open_tab(page, "Lessons")
    page.get_by_role("button", name="Show me → Training").first.click()
    settle(page)
    shown.append(view())
    assert shown == [("Estimators", "0.30"), ("Estimators", "0.31"), ("Training", "0.31"), ("Training", "1.00")]
    for expected in [("Lessons", "0.31"), ("Training", "0.31"), ("Estimators", "0.31"), ("Estimators", "0.30")]:
        page.go_back()
        settle(page)
        page.wait_for_function("expected => { const t = document.querySelector("
                               "'[data-testid=\"stTabs\"] [role=tab][aria-selected=true]'); "
                               "return t && t.innerText.trim() === expected; }", arg=expected[0])
        assert view() == expected
    page.go_forward()
    settle(page)
    page.wait_for_function("() => location.search.includes('mismatch=0.31')")
    assert view() == ("Estimators", "0.31")
    page.context.close()


def test_screenshots_for_the_readme(app):
    """docs/screenshot.png, training.png and your_run.png, at 1280×720 in presentation mode (TOYLAB_SCREENSHOT=1)."""
    if os.environ.get("TOYLAB_SCREENSHOT") != "1":
        pytest.skip("set TOYLAB_SCREENSHOT=1 to refresh the screenshots in docs/")
    collapse = next(lesson for lesson in LESSONS if lesson.id == "token_mask_collapse")
    page, _ = open_page(app, "present=1")
    page.screenshot(path=str(DOCS / "screenshot.png"))
    page.context.close()
    page, _ = open_page(app, lesson_link(collapse) + "&present=1")           # the lesson as the tour shows it
    page.wait_for_timeout(500)
    page.screenshot(path=str(DOCS / "training.png"))
    page.context.close()
    page, _ = open_page(app, "present=1&tab=Your%20run")
    file_input(page.get_by_role("tabpanel", name="Your run"), "Rollout log").set_input_files(str(EXAMPLE_LOG))
    page.get_by_role("tabpanel", name="Your run").locator('[data-testid="stVegaLiteChart"]').first.wait_for()
    settle(page)
    page.screenshot(path=str(DOCS / "your_run.png"))
    page.context.close()
