"""One date format for every date a person reads in the admin, with the zone it is in.

Django's English default ("Nov. 25, 2026, 10:48 p.m.") has no zone; the admin's own columns
(trainings/admin_html.py `local_time`) read "Wed 2026-11-25 22:48:00 CET", and so does every other
date field it shows through these. Input formats are Django's (the pickers write ISO dates).
"""

DATETIME_FORMAT = "D Y-m-d H:i:s T"
SHORT_DATETIME_FORMAT = "D Y-m-d H:i:s T"
DATE_FORMAT = "D Y-m-d"
SHORT_DATE_FORMAT = "Y-m-d"
TIME_FORMAT = "H:i:s"
