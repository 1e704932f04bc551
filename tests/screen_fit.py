"""What a 1280×720 screen shows of the page, measured in the browser: text cut off, and where the first chart starts.

Not a test module: ``tests/page/test_fits_the_screen.py`` and ``test_lessons_fit_the_screen.py`` sweep every tab, every
expander and every lesson with it, in both themes and both modes, so an element any change adds is measured too.

``CUT_JS`` returns ``{"problems": [...], "first_chart_top": px or null, "viewport": px}`` for the open tab, the header
and the sidebar (when open). A problem is one of:

- a chart's text (title, axis title or label, legend) whose box leaves the chart's view (its SVG, as drawn inside its
  place on the page) by more than a fifth of its font size (a glyph box's leading), or that Vega shortened with "…";
  a label Vega hid because it overlapped another is not drawn and not counted;
- a chart wider than its place;
- any other visible text in an element that clips (``overflow`` hidden or ``text-overflow: ellipsis``) and whose
  content is wider than it (a metric label "ESS fractio…", an uploader's list of file types), or that reaches past
  the page's right edge; a screen reader's label (1 px wide) and KaTeX's hidden MathML are not drawn and not counted;
- a button off the screen's edges (the header's, fixed in place in presentation mode);
- a table whose columns scroll sideways (its last column cut at the edge);
- a caption quoting a number to six significant digits or more ("≥ 2.23872"), where three tell its values apart.
"""

from tests.browser import wait_for_app
from toylab.lessons.lesson import settings as lesson_settings
from toylab.lessons.lesson import view_of
from toylab.state.query import VIEW_DEFAULTS, to_query, view_query

SCREEN = {"width": 1280, "height": 720}
IN_VIEW = 100           # pixels of the first chart in view on arrival, at least

CUT_JS = """() => {
    const problems = [];
    const visible = e => e.getClientRects().length > 0 && e.checkVisibility();
    const page = document.querySelector('[data-testid="stMain"]').getBoundingClientRect();
    const panel = [...document.querySelectorAll('[role="tabpanel"]')].find(visible);
    const sidebar = document.querySelector('[data-testid="stSidebarUserContent"]');     /* collapsed: off screen */
    const roots = [panel, document.querySelector('.st-key-toylab_header'), document.querySelector('.st-key-toylab_title'),
                   sidebar && visible(sidebar) && sidebar.getBoundingClientRect().right > 0 ? sidebar : null]
                  .filter(Boolean);
    const at = e => { const box = e.getBoundingClientRect(); return `at (${Math.round(box.left)}, ${Math.round(box.top)})`; };
    for (const root of roots) {
        for (const chart of root.querySelectorAll('[data-testid="stVegaLiteChart"]')) {
            if (!visible(chart)) continue;
            const svg = chart.querySelector('svg.marks');
            if (!svg) { problems.push('a chart not drawn as SVG ' + at(chart)); continue; }
            const view = svg.getBoundingClientRect(), place = chart.getBoundingClientRect();
            const left = Math.max(view.left, place.left), right = Math.min(view.right, place.right, page.right);
            if (view.right > place.right + 1)
                problems.push(`a chart ${Math.round(view.right - place.right)} px wider than its place ` + at(chart));
            for (const text of svg.querySelectorAll('text')) {
                const content = text.textContent.trim();
                if (!content || !text.getClientRects().length || text.getAttribute('opacity') === '0'
                    || parseFloat(getComputedStyle(text).opacity) === 0) continue;      // hidden: it overlapped
                const box = text.getBoundingClientRect();
                if (box.width === 0) continue;
                if (content.endsWith('…')) problems.push(`chart text shortened: "${content}" ` + at(chart));
                const slack = 0.2 * parseFloat(text.getAttribute('font-size') || getComputedStyle(text).fontSize);
                const out = Math.max(left - box.left, box.right - right, view.top - box.top, box.bottom - view.bottom);
                if (out > slack) problems.push(`chart text ${Math.round(out)} px outside its view: "${content}" ` + at(chart));
            }
        }
        for (const element of root.querySelectorAll('*')) {
            if (!visible(element) || element.closest('[data-testid="stVegaLiteChart"], [data-testid="stTooltipContent"], '
                                                     + '.katex-mathml, [data-testid="stIconMaterial"]')) continue;
            const box = element.getBoundingClientRect();
            if (box.width < 2 || box.height < 2) continue;                 // a screen reader's label: not drawn
            const text = element.textContent.trim(), style = getComputedStyle(element);
            const clips = style.textOverflow === 'ellipsis' || ['hidden', 'clip'].includes(style.overflowX);
            if (clips && text && text.length < 300 && element.scrollWidth > element.clientWidth + 1
                && !element.querySelector('[data-testid="stVegaLiteChart"], [data-testid="stDataFrame"], input, textarea'))
                problems.push(`text cut: "${text.slice(0, 60)}" ` + at(element));
            const own = [...element.childNodes].some(node => node.nodeType === 3 && node.textContent.trim());
            if (own && box.right > page.right + 1) problems.push(`text past the page's edge: "${text.slice(0, 60)}"`);
        }
        for (const button of root.querySelectorAll('button')) {
            const box = button.getBoundingClientRect();
            if (visible(button) && box.width > 1 && (box.left < -1 || box.right > innerWidth + 1))
                problems.push(`a button off the screen: "${button.textContent.trim().slice(0, 40)}" ` + at(button));
        }
        for (const table of root.querySelectorAll('[data-testid="stDataFrame"]')) {
            const scroller = table.querySelector('.dvn-scroller');
            if (visible(table) && scroller && scroller.scrollWidth > scroller.clientWidth + 1)
                problems.push(`a table scrolls sideways by ${scroller.scrollWidth - scroller.clientWidth} px ` + at(table));
        }
        for (const table of root.querySelectorAll('[data-testid="stTable"]')) {
            const scrolls = [table, ...table.querySelectorAll('*')].find(e => ['auto', 'scroll'].includes(
                getComputedStyle(e).overflowX) && e.scrollWidth > e.clientWidth + 1);
            if (visible(table) && scrolls)
                problems.push(`a table scrolls sideways by ${scrolls.scrollWidth - scrolls.clientWidth} px ` + at(table));
        }
        for (const caption of root.querySelectorAll('[data-testid="stCaptionContainer"]')) {
            const long = (caption.textContent.match(/\\d+\\.\\d+/g) || [])      /* six significant digits: not 0.00079 */
                .filter(number => number.replace('.', '').replace(/^0+/, '').length >= 6);
            if (visible(caption) && long.length)
                problems.push(`a caption quotes ${long.slice(0, 3).join(', ')}: "${caption.textContent.slice(0, 80)}"`);
        }
    }
    const first = panel && [...panel.querySelectorAll('[data-testid="stVegaLiteChart"]')].find(visible);
    return {problems, first_chart_top: first ? first.getBoundingClientRect().top : null, viewport: innerHeight};
}"""

DRAWN_JS = """() => {      /* the header drawn (not a skeleton between two runs) and every visible chart drawn */
    const header = document.querySelector('.st-key-toylab_header');
    return !!header && !header.querySelector('[data-testid="stSkeleton"]') && !!header.innerText.trim()
        && [...document.querySelectorAll('[data-testid="stVegaLiteChart"]')].filter(e => e.checkVisibility())
            .every(e => e.querySelector('svg.marks, canvas'));
}"""


def lesson_link(lesson):
    """The query of the view a lesson's button opens."""
    return "&".join(f"{name}={value}" for name, value in
                    (to_query(lesson_settings(lesson)) | view_query(VIEW_DEFAULTS | view_of(lesson))).items())


def measure(page):
    """The open view's problems and first chart, once the page is idle and drawn (``CUT_JS``)."""
    wait_for_app(page)
    page.wait_for_function(DRAWN_JS, timeout=60_000)
    page.wait_for_timeout(200)                      # Vega lays its labels out after the SVG appears
    return page.evaluate(CUT_JS)


def first_chart_in_view(measured):
    """Whether the first chart's top is at least IN_VIEW pixels above the viewport's bottom (or the view has none)."""
    top = measured["first_chart_top"]
    return top is None or top + IN_VIEW <= measured["viewport"]
