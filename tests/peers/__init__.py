"""Loopback stand-ins for the services the push gateway talks to, speaking their real protocols: APNs and
FCM (`apns_fcm.py`) with the credentials they check (`credentials.py`). Tests start them; the benchmark
imports them too (bench/peers.py, bench/peer_server.py). They live here, not in an app, so nothing that
ships carries a server that accepts any push."""
