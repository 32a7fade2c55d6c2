"""Run directories rebuilt from the history other monitoring systems already keep (a Prometheus server)."""
