"""Feedback: the ratings users gave answers, by week, and the question file they make."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app.engine.feedback import as_questions, question_file, stats
from app.ui import shared as ui
from core.errors import AQAError

settings = ui.settings()
service = ui.get_service(settings)
st.title("Feedback")
try:
    records = service.feedback.all()
except AQAError as exc:
    st.error(str(exc), icon=":material/error:")
    st.stop()
if not records:
    st.info(
        "No answer has been rated yet: rate one with the thumbs under it on the **Ask** page.",
        icon=":material/thumbs_up_down:",
    )
    st.stop()

counted = stats(records)
up, down, commented = st.columns(3)
up.metric("Thumbs up", counted.up)
down.metric("Thumbs down", counted.down)
commented.metric("With a comment", counted.commented)
if len(counted.weeks) > 1:
    st.bar_chart(
        pd.DataFrame(
            {"up": [w.up for w in counted.weeks], "down": [w.down for w in counted.weeks]},
            index=[w.week for w in counted.weeks],
        ),
        x_label="week",
        y_label="ratings",
    )

questions = as_questions(records)
review = sum(q.review for q in questions)


def questions_file() -> str:
    """Written on click, as `feedback export` writes it: a gold paper no longer indexed sends
    its question to review (knowing which takes a pass over the index)."""
    return question_file(as_questions(records, known=service.retriever.index.paper_ids()))


st.download_button(
    "Question file for `abstract-qa eval`",
    data=questions_file,
    file_name="feedback-questions.jsonl",
    mime="application/jsonl",
    key="feedback-questions",
    on_click="ignore",
    icon=":material/download:",
    type="primary",
)
st.caption(
    f"{len(questions) - review} regression question(s) from thumbs-up (their gold papers are the "
    f"ones the answer cited), {review} kept for review with the comment (thumbs-down, and "
    "thumbs-up without a cited paper). The same file as `abstract-qa feedback export FILE.jsonl`."
)
st.dataframe(
    pd.DataFrame(
        {
            "#": [r.id for r in records],
            "rated": [r.created.strftime("%Y-%m-%d %H:%M") for r in records],
            "rating": [r.rating for r in records],
            "question": [r.question for r in records],
            "comment": [r.comment or "" for r in records],
            "answer": [r.answer for r in records],
            "cited": [", ".join(r.cited) for r in records],
        }
    ).iloc[::-1],
    hide_index=True,
    key="feedback-table",
)
