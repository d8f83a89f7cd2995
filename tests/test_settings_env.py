from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from config.env import env_bool, env_float, env_int, env_list


def test_strict_helpers_refuse_values_they_cannot_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("X_BOOL", "maybe")
    monkeypatch.setenv("X_INT", "ten")
    monkeypatch.setenv("X_FLOAT", "1,5")
    monkeypatch.setenv("X_SMALL", "0")
    with pytest.raises(ImproperlyConfigured, match="X_BOOL"):
        env_bool("X_BOOL", False)
    with pytest.raises(ImproperlyConfigured, match="X_INT"):
        env_int("X_INT", 1)
    with pytest.raises(ImproperlyConfigured, match="X_FLOAT"):
        env_float("X_FLOAT", 1.0)
    with pytest.raises(ImproperlyConfigured, match="minimum"):
        env_int("X_SMALL", 5, minimum=1)


def test_strict_helpers_read_good_values_and_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("X_BOOL", "Yes")
    monkeypatch.setenv("X_LIST", "a, b,,c")
    assert env_bool("X_BOOL", False) is True
    assert env_list("X_LIST", []) == ["a", "b", "c"]
    assert env_int("X_UNSET", 7) == 7


@pytest.mark.django_db
def test_migrations_match_models() -> None:
    from django.core.management import call_command

    call_command("makemigrations", "--check", "--dry-run", verbosity=0)


def test_database_url_takes_libpqs_host_list_and_psycopg_gets_it_whole() -> None:
    """libpq's failover form (which dj-database-url alone refuses) reaches psycopg as host="h1,h2" and
    port="p1,p2", with target_session_attrs, so a connection finds the primary among the hosts."""
    from django.db.backends.postgresql.base import DatabaseWrapper

    from config.settings import _database

    config = _database(
        "postgres://app:s%40cret@db-a:5432,db-b:5433/reminders?target_session_attrs=read-write"
    )
    assert (config["HOST"], config["PORT"], config["NAME"]) == ("db-a,db-b", "5432,5433", "reminders")
    assert (config["USER"], config["PASSWORD"]) == ("app", "s@cret")
    assert config["OPTIONS"] == {"target_session_attrs": "read-write"}
    params = DatabaseWrapper({**config, "TIME_ZONE": None}).get_connection_params()
    assert (params["host"], params["port"], params["target_session_attrs"]) == (
        "db-a,db-b",
        "5432,5433",
        "read-write",
    )
    assert _database("postgres://app@db-a,db-b/reminders")["HOST"] == "db-a,db-b"
    assert _database("postgres://app@[::1]:5432,10.0.0.2/r")["PORT"] == "5432,5432"
    assert _database("postgres://app@db:6432/r")[("HOST")] == "db"  # one host: as before
    with pytest.raises(ImproperlyConfigured, match="host list"):
        _database("postgres://app@db-a:5432,:x/r")
