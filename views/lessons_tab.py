"""The lessons tab: short statements for a reading group, each with a button that opens its evidence."""

import pandas as pd
import streamlit as st

from toylab.lessons.lesson import settings as lesson_settings
from toylab.lessons.lesson import view_of
from toylab.lessons.tour import LESSONS
from views import sidebar

LABEL = "Lessons"


@st.cache_data(max_entries=16, show_spinner=False)
def lesson_evidence(lesson_id):
    """The Evidence of one lesson on the setting its button opens."""
    lesson = next(lesson for lesson in LESSONS if lesson.id == lesson_id)
    return lesson.check(lesson_settings(lesson))


def show(lesson):
    """on_click: put the lesson's setting into the sidebar's (and its tab's) controls and open its tab (the URL
    follows)."""
    sidebar.set_controls(lesson_settings(lesson))
    st.session_state.update(view_of(lesson))


def render(settings):
    st.caption("Each button sets the sidebar (and so the link) to a setting that shows the lesson, and opens "
               "the tab where it shows. The numbers below each lesson are computed on that setting.")
    for number, lesson in enumerate(LESSONS, start=1):
        with st.container(border=True):
            st.markdown(f"**{number}.** {lesson.text}")
            st.button(f"Show me → {lesson.tab}", key=f"lesson.{lesson.id}", on_click=show, args=(lesson,))
            evidence = lesson_evidence(lesson.id)
            with st.expander("the numbers" + (" · holds" if evidence.holds else " · does NOT hold")):
                st.dataframe(pd.DataFrame({"quantity": list(evidence.numbers),
                                           "value": [f"{value:.6g}" for value in evidence.numbers.values()]}),
                             hide_index=True, width="stretch")
