"""Reading the question: its parts, the detail it asks, the names it mentions, and the filters
its words set. Imports nothing else of `app`."""
