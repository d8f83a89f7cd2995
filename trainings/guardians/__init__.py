"""Guardians through the API: coaches manage them, a guardian manages their own devices and preferences
and sees (and answers) only their players' trainings. Models in trainings/models/guardians.py."""
