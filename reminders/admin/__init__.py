"""The engine's admin: jobs, occurrences, schedules, throttle policies, their History pages and the
person's time-zone setting. Importing the package registers the admins."""

from reminders.admin import jobs as _jobs  # noqa: F401  (registers the admins)
from reminders.admin import queue_grants as _queue_grants  # noqa: F401  (who publishes to which queue)
from reminders.admin import schedules as _schedules  # noqa: F401  (create, pause, resume, run now, preview)
