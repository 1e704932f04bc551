"""toylab's page, from a clone: ``streamlit run streamlit_app.py`` (installed: ``toylab app``).

Streamlit finds ``app`` below and serves the page's script, ``toylab_app/script/streamlit_app.py``, once the lifespan
has loaded the page (toylab_app/startup.py): its first visitors do not wait for the imports."""

import streamlit as st

from toylab_app.startup import page_loaded_first

app = st.App("toylab_app/script/streamlit_app.py", lifespan=page_loaded_first)
