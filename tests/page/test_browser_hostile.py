"""Hostile input in a real browser (headless Chromium, tests/browser.py): markup from a file, a file name, a column
picker or a link creates no element (no image, link, LaTeX, coloured text) and no request leaves the page: every
request the browser makes is recorded and must go to the app's own address. And the uploader's limit is the app's:
the browser refuses one byte over 50 MB, and at 50 MB exactly the file reaches the app, whose own check answers.
"""

from urllib.parse import quote

import pytest
from hostile_logs import HOST, MARKUP, jsonl, markup_cell, markup_names, row

from tests.browser import (
    file_input,
    wait_for_app,
)

pytestmark = pytest.mark.browser
HOSTILE_ELEMENTS_JS = """host => [...document.querySelectorAll("*")].filter(element => {
    const link = element.getAttribute("src") || element.getAttribute("href") || "";
    const text = element.textContent || "";
    return link.includes(host)                                                          // an image or a link
        || (element.matches("annotation") && text.includes("frac{1}{0}"))             // LaTeX
        || (element.matches("strong, b, em, i, del") && /^(bold|it)$/.test(text))       // Markdown emphasis
        || (element.matches("[class*=olored], [style*=color]") && text.includes("alarm"))   // :red[…]
        || (element.matches("img") && (element.getAttribute("alt") || "") === "img");
}).map(element => element.outerHTML.slice(0, 200))"""


class Page:
    """A page of the app whose every request is recorded."""

    def __init__(self, app, query=""):
        url, browser = app
        self.origin = url
        self.context = browser.new_context(viewport={"width": 1400, "height": 1000})
        self.requests = []
        self.context.on("request", lambda request: self.requests.append(request.url))
        self.page = self.context.new_page()
        self.page.goto(f"{url}/?{query}" if query else url)
        wait_for_app(self.page)

    def upload(self, name, content):
        panel = self.page.get_by_role("tabpanel", name="Your run")
        file_input(panel, "Rollout log").set_input_files(
            files=[{"name": name, "mimeType": "application/octet-stream", "buffer": content}],
            timeout=120_000)                  # 50 MB through the browser's protocol: tens of seconds on a loaded machine
        self.page.wait_for_timeout(500)
        wait_for_app(self.page)
        return panel

    def assert_nothing_hostile(self):
        assert self.page.locator('[data-testid="stException"]').count() == 0
        created = self.page.evaluate(HOSTILE_ELEMENTS_JS, HOST[len("http://"):])
        assert not created, created
        outside = [url for url in self.requests if not url.startswith((self.origin, "data:", "blob:"))]
        assert not outside, outside

    def close(self):
        self.assert_nothing_hostile()
        self.context.close()


@pytest.mark.parametrize("kind", ["image", "link", "html", "latex", "colour", "autolink", "bold"])
def test_markup_in_a_files_names_and_cells_creates_no_element_and_no_request(app, kind):
    page = Page(app, "tab=Your%20run")
    panel = page.upload(*markup_names(kind))
    assert MARKUP[kind].split()[0][:20] in panel.inner_text() or "which column holds" in panel.inner_text()
    page.assert_nothing_hostile()
    page.page.get_by_role("combobox", name="sampler").click()
    page.page.get_by_role("option").first.wait_for()                   # the picker's options are open
    options = page.page.get_by_role("option").all_inner_texts()
    assert any(MARKUP[kind][:10] in option for option in options), options
    page.assert_nothing_hostile()
    page.page.keyboard.press("Escape")
    panel = page.upload(*markup_cell(kind))
    assert "is not a number" in panel.inner_text()
    page.close()


def test_a_file_named_with_markup_creates_no_element_and_no_request(app):
    page = Page(app, "tab=Your%20run")
    panel = page.upload(MARKUP["image"] + MARKUP["link"] + ".jsonl", jsonl([row(3), row(2)]))
    assert "2 sequences" in panel.inner_text() and "![img](" in panel.inner_text()
    page.close()


@pytest.mark.parametrize("query", [
    f"tab={quote(MARKUP['image'])}",
    f"est=naive,tok_tis&tok_tis.C={quote(MARKUP['link'])}",
    f"{quote(MARKUP['autolink'])}=1&T={quote(MARKUP['latex'])}",
], ids=["tab", "threshold", "name and T"])
def test_markup_in_a_link_creates_no_element_and_no_request(app, query):
    page = Page(app, query)
    alerts = " ".join(page.page.locator('[data-testid="stAlert"]').all_inner_texts())
    assert "URL parameter" in alerts and ("![img](" in alerts or "[click](" in alerts or "\\frac" in alerts)
    page.close()


def test_the_uploaders_limit_and_the_apps_agree_at_50_mb(app):
    page = Page(app, "tab=Your%20run")
    panel = page.upload("over.csv", b"x" * (50_000_000 + 1))
    text = panel.inner_text()
    assert "50.0MB or smaller" in text                                  # the browser refuses it …
    assert "over the limit" not in text and "Upload a rollout log" in text   # … and the app never sees it
    panel = page.upload("at.csv", b"x" * 50_000_000)
    error = panel.get_by_text("line 1 is over the limit of 16 MB per line of text")    # the app's own check answers
    error.wait_for(timeout=60_000)
    page.close()


def test_an_upload_whose_bytes_streamlit_let_go_of_keeps_working(app):
    """The tab takes an upload's bytes and drops Streamlit's copies (so a closed session frees them): the file stays
    shown through a slider step, the uploader's × clears it, a new upload replaces it, and it stays shown through a
    visit to another tab (the uploader itself comes back empty, as Streamlit's always did)."""
    page = Page(app, "tab=Your%20run")
    panel = page.upload("a.jsonl", jsonl([row(3), row(2)]))
    assert "2 sequences" in panel.inner_text()
    page.page.get_by_role("slider", name="mismatch").focus()
    page.page.keyboard.press("ArrowRight")
    page.page.wait_for_timeout(500)
    wait_for_app(page.page)
    assert "2 sequences" in panel.inner_text() and page.page.locator('[data-testid="stException"]').count() == 0
    panel.get_by_text("Files and columns").click()       # with a file in view the uploaders are folded away
    panel.get_by_role("button", name="Remove a.jsonl").click()
    page.page.wait_for_timeout(500)
    wait_for_app(page.page)
    assert "Upload a rollout log" in panel.inner_text() and "2 sequences" not in panel.inner_text()
    panel = page.upload("b.jsonl", jsonl([row(3), row(2), row(1)]))
    assert "3 sequences" in panel.inner_text()
    page.page.get_by_role("tab", name="Estimators").click()
    wait_for_app(page.page)
    page.page.get_by_role("tab", name="Your run").click()
    wait_for_app(page.page)
    assert "3 sequences" in panel.inner_text() and page.page.locator('[data-testid="stException"]').count() == 0
    page.close()


def test_a_right_to_left_override_in_a_member_s_name_is_shown_escaped_in_the_browser(app):
    """Issue 41, case 9: a U+202E in a zip member's name turned the rest of its step's error around. The browser's
    text of the error holds the override escaped, the sentence after it in reading order."""
    from hostile_runs import zipped
    page = Page(app, "tab=Your%20run")
    panel = page.upload("run.zip", zipped({"step_2_\u202elmth.jsonl": b"not json\n"}))
    error = " ".join(panel.locator('[data-testid="stAlert"]').all_inner_texts())
    assert "step_2_\\u202elmth.jsonl: not JSON Lines" in error and "\u202e" not in panel.inner_text()
    page.close()
