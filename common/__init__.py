"""Small helpers both apps use, none of them about reminders or trainings: audit history and its admin
page, one-statement row inserts, webhook signing, the `__any` lookup, aware datetimes in the API, the
admin's time-zone template tags, compact JSON, CSV cells no spreadsheet runs as a formula, the site's
address, the API's `Idempotency-Key` (its one table, common/models.py). It imports neither app; both import
it. (An installed app so Django finds its template tags and that table.)"""
