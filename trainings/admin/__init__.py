"""The trainings admin for coaches and operators, and the operator's status page. Importing the package
registers the admins."""

from trainings.admin import experiments as _experiments  # noqa: F401  (registers the experiments' admin)
from trainings.admin import pushes as _pushes  # noqa: F401  (pushes, devices and their sends)
from trainings.admin import questionnaires as _questionnaires  # noqa: F401  (the teams' questionnaires)
from trainings.admin import trainings as _trainings  # noqa: F401  (registers the admins)
from trainings.admin import webhooks as _webhooks  # noqa: F401  (the platform's webhook subscriptions)
