"""What both schemathesis tests share: the checks they leave out (and why), and the token as schemathesis's
auth, so that its `ignored_auth` check knows which header is the credential."""

from __future__ import annotations

from typing import Any

from schemathesis.specs.openapi.checks import (
    negative_data_rejection,
    positive_data_acceptance,
    use_after_free,
)

# Every check schemathesis has, but these, each for a reason the schema cannot express:
# - positive_data_acceptance: "schema-valid" data is refused with a 400 naming the field wherever a value is
#   only valid in the database's eyes (a team, player or policy id that names no row, or one the caller
#   may not use; an instant outside the accepted range, which JSON Schema has no keyword for);
# - negative_data_rejection on form bodies and query strings: a form has no types and no null (DRF reads an
#   empty value of a nullable field as null, so a "wrongly typed" `window_seconds=` is a valid form), and
#   DRF's paginators read a bad `page` or `page_size` as the default, by design. JSON bodies are held to it;
# - use_after_free on a job: `DELETE /api/jobs/<key>/` cancels what has not fired and keeps the job, with its
#   occurrences, as its owner's history (docs/api.md), so reading it afterwards answers 200 by design.
FORM_MEDIA_TYPES = ("multipart/form-data", "application/x-www-form-urlencoded")


def excluded_checks(case: Any) -> list[Any]:
    excluded = [positive_data_acceptance]
    if case.media_type in FORM_MEDIA_TYPES or case.method not in ("POST", "PUT", "PATCH"):
        excluded.append(negative_data_rejection)
    if case.operation.path == "/api/jobs/{key}/":
        excluded.append(use_after_free)
    return excluded


TOKEN: dict[str, str] = {}
# What the auth gives before a test has made its token: schemathesis draws the explicit phase's cases
# while collecting, with no database yet. `token_of_the_test` swaps in the test's token.
PENDING = "made-by-the-test"


class TokenAuth:
    """A test's token through schemathesis's auth hook (`schema.auth(refresh_interval=None)(TokenAuth)`,
    never cached: each test has its own): its `ignored_auth` check then sends each request without it and
    with a wrong one too. The test puts its token in TOKEN["key"]."""

    def get(self, case: Any, context: Any) -> str:
        return TOKEN.get("key", PENDING)

    def set(self, case: Any, data: str, context: Any) -> None:
        case.headers = {**(case.headers or {}), "Authorization": f"Token {data}"}


def token_of_the_test(case: Any) -> Any:
    """The case with the test's token where it holds PENDING (a case drawn while collecting)."""
    if case.headers and case.headers.get("Authorization") == f"Token {PENDING}":
        case.headers["Authorization"] = f"Token {TOKEN['key']}"
    return case


def schema_authenticated(schema: Any) -> Any:
    schema.auth(refresh_interval=None)(TokenAuth)
    return schema
