"""toylab's page, installed: ``toylab app`` serves this script (from a clone: ``streamlit run streamlit_app.py``).
It sits in a folder of its own because Streamlit puts the script's folder first on sys.path."""

from toylab_app.page import run

run()
