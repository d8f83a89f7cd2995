"""The engine's front door: everything another app of this project may use of `reminders`, besides its models.

An app schedules jobs (`JobSpec`, `job_upsert`, `jobs_insert`), cancels their instants
(`occurrences_cancel`), registers the handlers its jobs call and reserves their key pattern (`register`,
`register_batch`, `keys_reserve`) and the queues it declares for itself (`queues_reserve`), receives a
`Delivery` per due occurrence and answers with a `TransportError`, checks a URL it will call back as
the HTTP transport will (`callback_url_refusal`), and asks a worker to scan after its
transaction commits (`scan_kick_on_commit`). The operator's status page reads the engine's figures (and
acts on retrying work) here too; the admin's hooks let an app name its jobs in words, give a person a
default zone, and add a readiness check. An app's own API views throttle as the engine's API does
(`TokenRateThrottle`; its JSON is read by common/http/parsers.py), and its own limits count in the
engine's counters (`Limit`, `requests_count`, `too_many`; a session-free view's `request_limits` are
counted with the address).
Nothing else of the engine's modules is imported from outside it (tests/test_import_graph.py fails when
one is), so the engine can be reshaped behind this module.

Generic helpers both apps use (history, row inserts, signing, the `__any` lookup, aware datetime fields,
template tags, the JSON parser, session-free routes and the API's error pages) are not engine code: they
live in `common/`.
"""

from __future__ import annotations

from reminders.admin.labels import job_describer_register
from reminders.admin.middleware import default_zone_register
from reminders.engine.handler_registry import keys_reserve, register, register_batch
from reminders.engine.kick import scan_kick_on_commit
from reminders.http.counts import Limit, Refused, digest, requests_count
from reminders.http.limits import TokenRateThrottle, too_many
from reminders.jobs import Callback, JobSpec, job_upsert, jobs_insert, occurrences_cancel
from reminders.ops.figures import (
    ERROR_PREFIX,
    FAILURE_SAMPLE,
    EngineStatus,
    MinutePoint,
    engine_status,
    failures_retry,
    occurrence_state,
    retrying_cancel,
    retrying_retry_now,
)
from reminders.ops.health import Check, readiness_check_register
from reminders.ops.logfilters import SHOWS_CREDENTIAL
from reminders.transports.base import Delivery, TransportError
from reminders.transports.http import callback_url_refusal
from reminders.transports.queue_access import queues_reserve

__all__ = [
    "ERROR_PREFIX",
    "FAILURE_SAMPLE",
    "SHOWS_CREDENTIAL",
    "Callback",
    "Check",
    "Delivery",
    "EngineStatus",
    "JobSpec",
    "Limit",
    "MinutePoint",
    "Refused",
    "TokenRateThrottle",
    "TransportError",
    "callback_url_refusal",
    "default_zone_register",
    "digest",
    "engine_status",
    "failures_retry",
    "job_describer_register",
    "job_upsert",
    "jobs_insert",
    "keys_reserve",
    "occurrence_state",
    "occurrences_cancel",
    "queues_reserve",
    "readiness_check_register",
    "register",
    "register_batch",
    "requests_count",
    "retrying_cancel",
    "retrying_retry_now",
    "scan_kick_on_commit",
    "too_many",
]
