"""The evaluation harness: runs a question set through the engine and scores it."""
