"""The engine at work: claim due occurrences, deliver them, mark them; the look-ahead timer, throttling,
the clock, wake-ups, and the registry of in-process handlers."""
