"""Delivery's raw SQL, one named statement per purpose with the comment above it saying what it does (as
trainings/queries.py and reminders/queries.py are their apps'); the ORM does the rest."""

from __future__ import annotations

from delivery.models import PushMinute, PushSend

_PUSH_MINUTE = PushMinute._meta.db_table

# The push gateway's round, before it sends (delivery/gateway/sender.py): the outcomes recorded for its push
# keys (one array, as its literal text): (push key, device, status); a push-level row (no device) says the
# push is finished. Prepared and bound on the server: after five rounds PostgreSQL keeps the generic plan,
# an index probe a key, where a plan made for each round's literal keys chose to read the whole table once
# it held a few tens of thousands of rows.
PUSH_SENDS_RECORDED = (
    f"SELECT push_key, device_id, status FROM {PushSend._meta.db_table} "  # noqa: S608
    "WHERE push_key = ANY(%s::varchar[])"
)

# Add a round's device outcomes to its minute (minute, accepted, not reached, accepted by a stand-in):
# gateways add, never overwrite.
PUSH_MINUTE_ADD = f"""
INSERT INTO {_PUSH_MINUTE} (minute, accepted, not_reached, standin) VALUES (%s, %s, %s, %s)
ON CONFLICT (minute) DO UPDATE SET accepted = {_PUSH_MINUTE}.accepted + excluded.accepted,
                                   not_reached = {_PUSH_MINUTE}.not_reached + excluded.not_reached,
                                   standin = {_PUSH_MINUTE}.standin + excluded.standin
"""  # noqa: S608 - the table name is a constant
