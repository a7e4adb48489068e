"""The lowest layer: records, settings, errors and text helpers. Imports nothing of ours."""
