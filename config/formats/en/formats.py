"""One date format for every date a person reads in the admin, with the zone it is in.

Django's English default ("Nov. 25, 2026, 10:48 p.m.") has no zone; the admin's own columns
(trainings/admin_html.py `local_time`) read "Wed 2026-11-25 22:48:00 CET", and so does every other
date-and-time field it shows through these. Dates alone and times alone keep Django's English formats:
push texts are rendered with them ("starts at 6 p.m."). Input formats are Django's.
"""

DATETIME_FORMAT = "D Y-m-d H:i:s T"
SHORT_DATETIME_FORMAT = "D Y-m-d H:i:s T"
