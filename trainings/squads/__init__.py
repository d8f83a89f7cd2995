"""Squad size: a training's `min_players` and `max_players`, its waiting list, the "you're in" notice and
the coaches' short-squad alert (docs/squads.md)."""
