"""toylab's page: the script Streamlit runs on every rerun, served by ``streamlit run streamlit_app.py`` in a clone
(that file's ``st.App``) and by ``toylab app`` when installed. It sits in a folder of its own because Streamlit puts
the script's folder first on sys.path."""

from toylab_app.page import run

run()
