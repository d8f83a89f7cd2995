"""Durable publishing to RabbitMQ queues, one AMQP transaction per batch: the plumbing the engine's
`rabbitmq` callbacks and the push queue both publish through (`publisher.py`). The frames it writes are a
protocol of their own, in common/wire/amqp_frames.py; what stays here is a client of py-amqp and kombu
(connections, transactions, returns, reconnects, Django's broker settings), not a wire format."""
