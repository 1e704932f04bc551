"""The lessons as a guided tour: a lesson's statement on top of the tab it opens, its marks on that tab's charts,
and the next and previous lesson a key press away.

A lesson is on show while the page is exactly at its view: its Settings and every control of its tab as its
button sets them (``toylab.lessons.lesson``). So a lesson's link shows the lesson, Back returns to it after a step
away, and a change of any control leaves it (the page then shows that setting, without the lesson's marks).
"""

import streamlit as st

from toylab.lessons.lesson import settings as lesson_settings
from toylab.lessons.lesson import view_of
from toylab.lessons.tour import KEYS, LESSONS
from toylab.presentation import frames
from toylab.state.query import LESSONS_TAB, VIEW_PARAMETERS
from toylab_app import address, sidebar

VIEWS = [(number, lesson, lesson_settings(lesson), view_of(lesson)) for number, lesson in enumerate(LESSONS, start=1)]


@st.cache_data(max_entries=len(LESSONS), show_spinner=False)
def evidence(lesson_id):
    """The Evidence of one lesson on the setting its button opens: one entry per lesson (the Lessons tab asks for
    every one on each run, so fewer entries than lessons would compute them all again each time)."""
    lesson = next(lesson for lesson in LESSONS if lesson.id == lesson_id)
    return lesson.check(lesson_settings(lesson))


def show(lesson):
    """on_click: put the lesson's setting into the sidebar's controls and its view (tab and the tab's controls)
    into session state; the URL follows."""
    sidebar.set_controls(lesson_settings(lesson))
    st.session_state.update(view_of(lesson))


def _open_lessons():
    st.session_state[sidebar.TAB_KEY] = LESSONS_TAB


def on_show(settings):
    """(number, lesson) of the lesson whose view the page is at, or None."""
    view = address.view()          # a control that does not matter in this view (a sweep's panel when not presenting)
    return next(((number, lesson) for number, lesson, shown, opened in VIEWS       # does not take the lesson away
                 if shown == settings and all(view[name] == value for name, value in opened.items()
                                              if VIEW_PARAMETERS[name].shown(view))), None)


def marks(settings, chart):
    """The lesson on show's marks on ``chart`` (a key of ``toylab.lessons.lesson.CHARTS``) as a frame
    (``frames.mark_frame``, numbered as in the lesson's list), or None."""
    shown = on_show(settings)
    if shown is None:
        return None
    _, lesson = shown
    everything = evidence(lesson.id).marks
    numbered = [(number, mark) for number, mark in enumerate(everything, start=1) if mark.chart == chart]
    if not numbered:
        return None
    frame = frames.mark_frame(everything)
    return frame.iloc[[number - 1 for number, _ in numbered]].reset_index(drop=True)


def marked(settings):
    """The charts (keys of ``toylab.lessons.lesson.CHARTS``) the lesson on show marks, in the order of its marks; empty
    when no lesson is on show. A tab draws these first, sized to be in view with the lesson box."""
    shown = on_show(settings)
    return [] if shown is None else list(dict.fromkeys(mark.chart for mark in evidence(shown[1].id).marks))


def banner(tab, settings):
    """On top of ``tab``: the lesson on show (if it opens this tab) in one row — its claim, which names the marks by
    their numbers, and the tour's buttons; its full statement and its marks in words on demand (*Why*)."""
    shown = on_show(settings)
    if shown is None or shown[1].tab != tab:
        return
    number, lesson = shown
    with st.container(border=True, key="lesson_banner"):
        statement, steps = st.columns([2.3, 1], vertical_alignment="center", gap="small")
        statement.markdown(f"**Lesson {number} of {len(LESSONS)}.** {lesson.claim}")
        with steps.container(horizontal=True, gap="small", horizontal_alignment="right"):
            with st.popover("Why", icon=":material/info:", help="The lesson in full, and each numbered mark in words"):
                st.markdown(lesson.text)
                st.markdown("\n".join(f"{index}. {mark.text}" for index, mark in
                                       enumerate(evidence(lesson.id).marks, start=1)))
            if number > 1:
                st.button("", key="lesson_previous", on_click=show, args=(LESSONS[number - 2],),
                          shortcut="B", icon=":material/arrow_back:", help=f"Previous: lesson {number - 1} (key B)")
            if number < len(LESSONS):
                st.button("Next", key="lesson_next", on_click=show, args=(LESSONS[number],), shortcut="N",
                          icon=":material/arrow_forward:", help=f"Lesson {number + 1} (key N)")
            st.button("", key="lesson_all", on_click=_open_lessons, shortcut="L",
                      icon=":material/list:", help=f"All lessons: the {LESSONS_TAB} tab (key L)")


def keys_text():
    """The tour's keyboard shortcuts, for help texts: 'N next lesson · B previous lesson · …'."""
    return " · ".join(f"{key} {what}" for key, what in KEYS.items())

