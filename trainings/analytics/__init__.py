"""What the reminders achieve: answers attributed to the reminders that preceded them, kept as daily
summaries (per team, rule and offset; per player) so a coach's page reads a few thousand rows however many
pushes and answers there are. docs/analytics.md says what every figure means.

- attribution.py: the pure rules (which reminder an answer counts for, the time-to-answer bands);
- summary.py: keeping the daily summaries up to date from pushes, device sends and answers;
- figures.py: reading them for a period and the teams a user may see.
"""
