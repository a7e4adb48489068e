"""The question engine: retrieval over the index, relevance and refusal, counting, and the
service that turns a question into a typed `Answer`. Imports `app.query` and `app.providers`,
never a front."""
