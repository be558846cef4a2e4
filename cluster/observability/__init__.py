"""Cluster observability on the nodes: the Slurm and EFA exporters, the Prometheus agent's rendered config and
scrape targets, the alert rules and the Grafana dashboards (docs/observability.md)."""
