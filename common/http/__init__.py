"""Web plumbing that knows no app: the strict JSON parser, the session-free route for views whose URL is
their credential, and the JSON error pages under /api/."""
