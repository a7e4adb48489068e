"""The prompt templates, as files (`*.txt`), shipped with the package; see `app/prompts.py`."""
