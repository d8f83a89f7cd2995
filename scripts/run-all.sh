#!/usr/bin/env bash
# Runs the service's processes in the foreground (web, worker, beat and the push gateway, which sends to the
# logging provider while no APNs or FCM credentials are set); Ctrl-C (or any one exiting) stops them all.
set -euo pipefail
BIN=${BIN:-.venv/bin}
ADDR=${ADDR:-127.0.0.1:8000}
# Prometheus multiprocess mode: the web, the worker's prefork children (and a push gateway started with the
# same variable) write their samples here, and the web's /metrics sums them. Emptied of the last run's
# files at every start, as prometheus-client requires.
export PROMETHEUS_MULTIPROC_DIR=${PROMETHEUS_MULTIPROC_DIR:-var/prometheus}
mkdir -p "$PROMETHEUS_MULTIPROC_DIR"
find "$PROMETHEUS_MULTIPROC_DIR" -maxdepth 1 -name '*.db' -delete
# Signal only our own children: each shuts its own workers down cleanly.
trap 'trap - EXIT INT TERM; kill $(jobs -p) 2>/dev/null; wait' EXIT INT TERM
"$BIN/celery" -A config worker --loglevel=INFO --concurrency=2 --hostname "worker@%h" &
"$BIN/celery" -A config beat --loglevel=INFO --scheduler django_celery_beat.schedulers:DatabaseScheduler \
    --pidfile= &
"$BIN/python" manage.py push_gateway &
"$BIN/python" manage.py runserver "$ADDR" --noreload &
wait -n
