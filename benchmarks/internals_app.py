"""The page with Streamlit's copy of each upload kept (``drop_uploaded_copies`` a no-op): the "without" side of
``python benchmarks/internals.py uploads``."""

import runpy
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import toylab_app.your_run_uploads  # noqa: E402

toylab_app.your_run_uploads.drop_uploaded_copies = lambda: None
runpy.run_path(str(ROOT / "toylab_app" / "script" / "streamlit_app.py"), run_name="__main__")
