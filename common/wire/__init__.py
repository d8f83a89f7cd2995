"""The protocols the project speaks itself, outside every app: HTTP/2 and HPACK for the push providers
(`h2client.py`, `h2_connection.py`, `hpack_codec.py`), and the tests of each against its RFC in
tests/wire/. They know no Django model and no app; an app hands them bytes and headers."""
