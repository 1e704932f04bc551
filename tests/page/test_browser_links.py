"""Links the server cannot read, in a real browser (headless Chromium, tests/browser.py): Streamlit drops a link of over
1,000 parameters unread, and the page says so (toylab_app/address.py asks the browser, which alone still has it); the
notice goes once the address is the page's own; the script that asks takes no room on the page."""

import urllib.error
import urllib.request

import pytest

from tests.browser import wait_for_app
from toylab.catalogue.estimators import ESTIMATORS
from toylab.state.query import to_query
from toylab.state.settings import Settings

pytestmark = pytest.mark.browser
WARNINGS = '[data-testid="stAlertContentWarning"]'


def warnings_at(app, query):
    url, browser = app
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.goto(f"{url}/?{query}")
    wait_for_app(page)
    page.wait_for_timeout(1500)                              # the browser's answer reruns the page
    wait_for_app(page)
    texts = page.locator(WARNINGS).all_inner_texts()
    box = page.locator(".st-key-_toylab_dropped_link").bounding_box()
    context.close()
    return texts, box


def test_a_link_of_over_1000_parameters_is_dropped_with_a_notice(app):
    texts, box = warnings_at(app, "T=5&" + "&".join(f"x{index}=1" for index in range(1200)))
    assert any("This link has 1,201 parameters" in text and "over the 1,000 parameters" in text for text in texts)
    assert box is None or box["height"] <= 1


def test_a_link_within_the_limits_has_no_such_notice(app):
    texts, _ = warnings_at(app, "T=5&mismatch=0.5")
    assert not any("parameters in" in text for text in texts)


def test_the_longest_link_the_page_writes_is_served(app):
    """Every estimator, every threshold moved from its default: the page's longest link, about 11 kB, is far under the
    web server's limit on a request's head, about 128 kB (a longer one gets a bare HTTP 400 before the app sees it)."""
    url, _ = app
    thresholds = tuple((id, name, param.high if param.high is not None else param.default)
                       for id, estimator in ESTIMATORS.items() for name, param in estimator.params.items()
                       if param.choices is None and param.parse is None and not isinstance(param.default, str))
    query = urllib.parse.urlencode(to_query(Settings(estimators=tuple(ESTIMATORS), thresholds=thresholds)))
    assert 8_000 < len(query) < 12_000
    with urllib.request.urlopen(f"{url}/?{query}", timeout=30) as response:
        assert response.status == 200
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{url}/?x={'a' * 200_000}", timeout=30)
    assert refused.value.code == 400
