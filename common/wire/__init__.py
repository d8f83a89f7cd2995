"""The protocols the project speaks itself, outside every app: HTTP/2 and HPACK for the push providers
(`h2client.py`, `h2_connection.py`, `hpack_codec.py`), an SMTP client for the email channel (`smtp.py`)
and the AMQP frames of a publish (`amqp_frames.py`). Each is tested against its RFC, or the reference
implementation, in tests/wire/. They know no model and no app: an app hands them bytes and headers."""
