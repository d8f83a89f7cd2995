"""Durable publishing to RabbitMQ queues, one AMQP transaction per batch: the plumbing the engine's
`rabbitmq` callbacks and the push queue both publish through (`publisher.py`), and the frames it writes
(`frames.py`)."""
