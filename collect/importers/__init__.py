"""Run directories rebuilt from what other tools already recorded: a sysstat archive, a Prometheus server's
history, an nvidia-smi log (docs/run-format.md, "Imported runs"); rundir.py is what the file importers
share."""
