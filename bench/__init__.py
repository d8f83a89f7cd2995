"""The benchmark: this project's scheduler beside django-celery-beat and Celery ETA, on the same work.

Run it with `python -m bench [--quick] [--only NAME ...]` (or `make bench` / `make bench-quick`) with
DATABASE_URL=postgres://... and CELERY_BROKER_URL=amqp://... set. It creates and drops its own database and
uses uniquely named queues, prints a table, and writes JSON and a PNG chart to bench/results/.
"""
