"""A reminder fires and reaches people: who is pending, what they read, quiet hours and critical
reminders, fair draining, moved and cancelled notices, the coach's remind-now, publishing and outcomes."""
