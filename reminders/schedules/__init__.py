"""Recurring schedules: cron and @every/@at expressions, their timelines in a time zone, and their writes."""
