"""``toylab app``'s main file (toylab_app/command.py), as ``streamlit_app.py`` is a clone's: an ``st.App`` that
serves the page's script, ``streamlit_app.py`` beside it, once its lifespan has loaded the page
(toylab_app/startup.py)."""

import streamlit as st

from toylab_app.startup import page_loaded_first

app = st.App("streamlit_app.py", lifespan=page_loaded_first)
