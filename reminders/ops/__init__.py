"""Operations: the status figures, Prometheus metrics, health checks and log format."""
