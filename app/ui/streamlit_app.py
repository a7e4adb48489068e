"""The Streamlit front end: `streamlit run app/ui/streamlit_app.py` (or `make run`)."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

HERE = Path(__file__).resolve().parent

st.set_page_config(page_title="abstract-qa", page_icon=":material/menu_book:", layout="wide")
page = st.navigation(
    [
        st.Page(HERE / "views" / "chat.py", title="Ask", icon=":material/forum:", default=True),
        st.Page(HERE / "views" / "table.py", title="Table", icon=":material/table_view:"),
        st.Page(HERE / "views" / "ingest.py", title="Add papers", icon=":material/upload_file:"),
        st.Page(HERE / "views" / "feedback.py", title="Feedback", icon=":material/thumbs_up_down:"),
    ]
)
page.run()
