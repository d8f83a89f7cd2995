"""Timing experiments: a rule's alternative offset lists tried side by side, and which works better.

- assignment.py: which arm a player is in (a stable hash of experiment and player), and its record;
- control.py: an operator starts, stops and promotes (the rule and its trainings' schedules follow);
- statistics.py: Wilson intervals and the difference of two rates (pure);
- results.py: the arms' answer rates and times to answer, compared with the rule's;
- adaptive.py (`mode: "adaptive"`): arms drawn per training by Thompson sampling, snapshots of the
  posteriors and the stopping rule that promotes the winner; bandit.py its pure statistics,
  adaptive_checks.py what its variants must be, adaptive_page.py and adaptive_api.py how it is read.

Scheduling (trainings/planning/scheduling.py) gives a rule's jobs every arm's instants; firing
(trainings/reminding/firing.py) reminds at each instant only the players whose arm has that offset.
docs/analytics.md explains the figures.
"""
