"""`python -m bench [--quick] [--only NAME ...]`: run the scenarios, print the table, write JSON and PNG.

Needs DATABASE_URL=postgres://... (only its server is used: the run creates and drops its own database,
`bench_reminders_<checkout folder>` by default, so runs from two worktrees never drop each other's) and
CELERY_BROKER_URL=amqp://... (queues named bench.<run id>.*, deleted afterwards). Child processes, queues and
the database are removed however the run ends, Ctrl-C included; with --keep-data the database stays, and a
later --keep-data run with the same --database-name reuses it.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from bench.harness import RESULTS, Harness
from bench.report import Section, render_table, write_chart, write_json


def _default_database_name() -> str:
    """One name a checkout: the run drops its database WITH (FORCE) at its start and its end."""
    folder = re.sub(r"\W", "_", Path(__file__).resolve().parents[1].name.lower())
    return f"bench_reminders_{folder}"[:63]


SCENARIOS = (
    "scheduling", "dispatch", "lateness", "claim", "memory", "trainings", "push", "answers", "email",
    "email_wire", "admin", "webhooks", "roster",
)  # fmt: skip
# Run only when named with --only: filling and vacuuming 30 M rows alone takes many minutes; the storm
# schedules 5,000 trainings and sends 300,000 pushes.
APART = ("scale", "storm", "analytics")


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (under 2 minutes)")
    parser.add_argument(
        "--only",
        nargs="+",
        choices=SCENARIOS + APART,
        metavar="NAME",
        help=f"any of {', '.join(SCENARIOS + APART)} (the last only when named)",
    )
    parser.add_argument(
        "--storm-reminders",
        type=int,
        default=None,
        metavar="N",
        help="reminders at the storm's instant (20 pushes each; default 5,000, 100 with --quick)",
    )
    parser.add_argument(
        "--analytics-pushes",
        type=int,
        default=None,
        metavar="N",
        help="pushes in the analytics scenario's month (default 10,000,000, 200,000 with --quick)",
    )
    parser.add_argument(
        "--database-name", default=_default_database_name(), help="database the run creates and drops"
    )
    parser.add_argument(
        "--keep-data",
        action="store_true",
        help="keep the run's database afterwards, and reuse it when an earlier --keep-data run finished its "
        "data (the analytics scenario then times the pages without filling again)",
    )
    parser.add_argument(
        "--maintenance-database",
        default="postgres",
        help="existing database to connect to while creating and dropping the run's (on a shared server)",
    )
    return parser.parse_args()


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _machine(h: Harness) -> dict[str, Any]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        pg = cursor.fetchone()[0]
    conn = h.amqp_connection()
    rabbit = getattr(conn, "server_properties", {}).get(
        "version", "?"
    )  # set by the handshake; not in the stubs
    conn.close()
    return {
        "cpus": os.cpu_count(),
        "loadavg_start": os.getloadavg(),
        "python": platform.python_version(),
        "postgresql": pg,
        "rabbitmq": rabbit.decode() if isinstance(rabbit, bytes) else rabbit,
        "platform": platform.platform(),
    }


def main() -> int:
    args = _parse()
    database_url = os.environ.get("DATABASE_URL", "")
    broker_url = os.environ.get("CELERY_BROKER_URL", "")
    if not database_url.startswith(("postgres://", "postgresql://")) or not broker_url.startswith("amqp://"):
        print(
            "The benchmark runs against the real services: set DATABASE_URL=postgres://... and "
            "CELERY_BROKER_URL=amqp://...",
            file=sys.stderr,
        )
        return 2
    selected = args.only or list(SCENARIOS)
    h = Harness(
        quick=args.quick,
        base_database_url=database_url,
        broker_url=broker_url,
        database_name=args.database_name,
        maintenance_database=args.maintenance_database,
        keep_database=args.keep_data,
    )
    signal.signal(signal.SIGTERM, _raise_interrupt)
    signal.signal(signal.SIGHUP, _raise_interrupt)
    sections: list[Section] = []
    started = time.time()
    meta: dict[str, Any] = {"run_id": h.run_id, "quick": args.quick, "selected": selected}
    try:
        h.create_database()
        # This process and every child it starts see only the run's database and queue.
        os.environ.update(h.child_env())
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0, interactive=False)
        meta["machine"] = _machine(h)
        meta["sizes"] = vars(h.sizes)
        print(
            f"bench {h.run_id}: {'quick' if args.quick else 'full'} run of {', '.join(selected)}", flush=True
        )
        for name in selected:
            if name == "memory" and "claim" in selected:
                continue  # measured together with the claim, on the same growing table
            print(f"- {name}", flush=True)
            section_start = time.time()
            try:
                sections += _run(h, name, selected, args)
            except Exception as exc:
                traceback.print_exc()
                sections.append(Section(name, skipped=f"error: {type(exc).__name__}: {exc}"))
            print(f"  ({time.time() - section_start:.0f} s)", flush=True)
    except KeyboardInterrupt:
        print("\ninterrupted: cleaning up", file=sys.stderr)
        meta["interrupted"] = True
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not skip the cleanup
        h.cleanup()
        signal.signal(signal.SIGINT, signal.default_int_handler)
    meta["seconds"] = time.time() - started
    meta["loadavg_end"] = os.getloadavg()
    meta["git"] = _git()
    if not sections:
        return 1
    table = render_table(sections)
    print()
    print(table)
    RESULTS.mkdir(parents=True, exist_ok=True)
    json_path = RESULTS / f"{h.run_id}.json"
    meta["table"] = table
    write_json(json_path, meta, sections)
    machine = meta.get("machine", {})
    title = (
        f"Reminders bench {h.run_id} ({'quick' if args.quick else 'full'}), {machine.get('cpus')} CPUs, "
        f"PostgreSQL {machine.get('postgresql')}, RabbitMQ {machine.get('rabbitmq')}"
    )
    print(f"\njson: {json_path}")
    print(write_chart(RESULTS / f"{h.run_id}.png", sections, title))
    print(f"took {meta['seconds']:.0f} s; load average {meta['loadavg_end'][0]:.2f} at the end")
    return 130 if meta.get("interrupted") else 0


def _run(h: Harness, name: str, selected: list[str], args: argparse.Namespace) -> list[Section]:
    if name == "scheduling":
        from bench.scenarios import scheduling

        return [scheduling.run(h)]
    if name == "dispatch":
        from bench.scenarios import dispatch

        return [dispatch.run(h)]
    if name == "lateness":
        from bench.scenarios import lateness

        return [lateness.run(h)]
    if name == "scale":
        from bench.scenarios import scale

        return [scale.run(h)]
    if name in ("claim", "memory"):
        from bench.scenarios import tablesize

        return tablesize.run(h, claim="claim" in selected, memory="memory" in selected)
    if name == "storm":
        from bench.scenarios import storm

        return [storm.run(h, args.storm_reminders)]
    if name == "analytics":
        from bench.scenarios import analytics

        return [analytics.run(h, args.analytics_pushes)]
    if name == "push":
        from bench.scenarios import push

        return [push.run(h)]
    if name == "answers":
        from bench.scenarios import answers

        return [answers.run(h)]
    if name == "email":
        from bench.scenarios import email

        return [email.run(h)]
    if name == "email_wire":
        from bench.scenarios import email_wire

        return [email_wire.run(h)]
    if name == "admin":
        from bench.scenarios import admin

        return [admin.run(h)]
    if name == "webhooks":
        from bench.scenarios import webhooks

        return [webhooks.run(h)]
    if name == "roster":
        from bench.scenarios import roster

        return [roster.run(h)]
    from bench.scenarios import trainings

    return [trainings.run(h)]


def _git() -> str:
    try:
        return subprocess.run(
            ["git", "describe", "--always", "--dirty"], capture_output=True, text=True, check=False, timeout=5
        ).stdout.strip()
    except OSError:
        return "?"


if __name__ == "__main__":
    sys.exit(main())
