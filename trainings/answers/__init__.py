"""Answers without a session: signed answer links (`links.py`), following one and recording its answer
(`recording.py`), and the API that does it (`views.py`, `serializers.py`). The app's side of it is
docs/app-contract.md."""
