"""The report written out: Markdown, HTML (with figures) and JSON."""
