#!/usr/bin/env bash
# Runs the service's processes in the foreground (web, worker, beat and the push gateway, which sends to the
# logging provider while no APNs or FCM credentials are set) under scripts/supervise.py: a process that exits
# is restarted (a `run-all:` line says which, its exit code and the restart count) and the others keep
# running; Ctrl-C (or SIGTERM to this script's pid) stops them all.
set -euo pipefail
BIN=${BIN:-.venv/bin}
export BIN ADDR=${ADDR:-127.0.0.1:8000}
# Prometheus multiprocess mode: the web, the worker's prefork children (and a push gateway started with the
# same variable) write their samples here, and the web's /metrics sums them. Emptied of the last run's
# files at every start, as prometheus-client requires.
export PROMETHEUS_MULTIPROC_DIR=${PROMETHEUS_MULTIPROC_DIR:-var/prometheus}
mkdir -p "$PROMETHEUS_MULTIPROC_DIR"
find "$PROMETHEUS_MULTIPROC_DIR" -maxdepth 1 -name '*.db' -delete
exec "$BIN/python" scripts/supervise.py
