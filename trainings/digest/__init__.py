"""The coach's digest: who still owes what, told to a team's coaches before each training, in a morning
summary of the day, and when a player declines late. Kinds DIGEST, SUMMARY and DECLINED in
trainings/planning/kinds.py; docs/coaches.md is the coach's guide."""
