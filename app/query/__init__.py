"""Reading the question: its parts, the detail it asks, the names it mentions, the filters its
words set, and the one record (`Query`) that carries all of it through an answer. Imports
nothing else of `app`."""
