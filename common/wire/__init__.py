"""The protocols the project speaks itself, outside every app: HTTP/2 and HPACK for the push providers
(`h2client.py`, `h2_connection.py`, `hpack_codec.py`) and the AMQP frames of a publish
(`amqp_frames.py`), each tested against its RFC or reference implementation in tests/wire/. They know no
model and no app: an app hands them bytes and headers."""
