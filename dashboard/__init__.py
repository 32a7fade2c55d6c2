"""The Dash app that compares runs, and the sizing analysis behind it (reads run directories only)."""
