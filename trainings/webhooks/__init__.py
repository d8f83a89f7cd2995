"""Events back to the platform: subscriptions (the API), their signed deliveries by the engine, and the
check that disables an endpoint that has failed for a day (docs/api.md, "Events (webhooks)")."""
