"""toylab's page, from a clone: ``streamlit run streamlit_app.py`` (installed: ``toylab app``). The page is
``toylab_app/page.py``; this script runs it on every rerun."""

from toylab_app.page import run

run()
