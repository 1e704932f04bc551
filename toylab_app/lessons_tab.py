"""The lessons tab: short statements for a reading group, each with a button that opens its evidence; the first
one starts the guided tour (``toylab_app.tour``)."""

import streamlit as st

from toylab.lessons.tour import INTRODUCTION, LESSONS
from toylab.presentation import frames
from toylab_app import tour

NUMBERS_KEY = "lesson_numbers"           # lesson_numbers.<id>: whether that lesson's numbers are open


def render(settings):
    st.markdown(INTRODUCTION)
    st.caption("Each button sets the sidebar (and so the link) to a setting that shows the lesson, and opens the tab "
               "where it shows, with the lesson on top and its marks numbered on the chart. The numbers below each "
               f"lesson are computed on that setting. Keys: {tour.keys_text()}.")
    st.button("Start the tour", key="lesson_start", on_click=tour.show, args=(LESSONS[0],), shortcut="N",
              icon=":material/play_arrow:", type="primary", help="Lesson 1 (key N)")
    for number, lesson in enumerate(LESSONS, start=1):
        with st.container(border=True):
            st.markdown(f"**{number}. {lesson.claim}** {lesson.text}")
            st.button(f"Show me → {lesson.tab}", key=f"lesson.{lesson.id}", on_click=tour.show, args=(lesson,))
            evidence = tour.evidence(lesson.id)
            numbers = st.expander("the numbers" + (" · holds" if evidence.holds else " · does NOT hold"),
                                  key=f"{NUMBERS_KEY}.{lesson.id}", on_change="rerun")
            if numbers.open:                   # built only while open: a step redraws one closed expander a lesson
                numbers.dataframe(frames.evidence_table(evidence.numbers), hide_index=True, width="stretch")
