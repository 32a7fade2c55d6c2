"""The Dash app that compares runs; it only reads run directories, and calls sizing/ for the report."""
