"""A training and its reminders' plan: the kinds table and the default rules, offsets and answer windows,
the writes on trainings, invitations and rules, and the engine jobs they schedule."""
