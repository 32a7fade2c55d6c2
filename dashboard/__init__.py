"""The Dash app that compares runs: it only reads run directories and shows what sizing/ computes from
them (the sizing analysis itself lives in sizing/, which never imports the dashboard)."""
