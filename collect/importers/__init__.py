"""Run directories rebuilt from what other tools already recorded: a sysstat archive, a Prometheus server's
history (docs/run-format.md, "Imported runs")."""
