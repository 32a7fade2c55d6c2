"""Loading and analysing runs: each run's figures and verdicts, comparisons and series."""
