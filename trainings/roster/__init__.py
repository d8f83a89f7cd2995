"""The roster through the API: teams, players, memberships (one at a time, and in bulk by the platform's
external ids). Models in trainings/models/roster.py; guardians keep their own API (trainings/guardians/)."""
