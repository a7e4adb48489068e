"""The Streamlit front: `streamlit run app/ui/streamlit_app.py` (or `make run`)."""
