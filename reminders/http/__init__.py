"""The HTTP API for jobs, schedules and throttle policies: views, serializers, parsers and abuse limits."""
