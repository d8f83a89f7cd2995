from django.db import migrations


def create_beat_tasks(apps, schema_editor):
    from reminders.beat import ensure_periodic_tasks

    ensure_periodic_tasks(
        apps.get_model("django_celery_beat", "IntervalSchedule"),
        apps.get_model("django_celery_beat", "PeriodicTask"),
    )


def remove_beat_tasks(apps, schema_editor):
    from reminders.beat import PURGE_TASK_NAME, SCAN_TASK_NAME

    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(
        name__in=[SCAN_TASK_NAME, PURGE_TASK_NAME]
    ).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("reminders", "0001_initial"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(create_beat_tasks, remove_beat_tasks)]
