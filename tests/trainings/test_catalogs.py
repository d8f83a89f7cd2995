"""The catalogs in locale/: every language the service speaks has one, every text of the source is in it,
translated (not fuzzy, placeholders intact), and the compiled .mo the install wrote says what the .po says.

Parsed with Babel (the library that compiles them); the source's texts are extracted with Django's
makemessages into a temporary directory, with the options `make messages` uses."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from babel.messages.catalog import Catalog, Message
from babel.messages.pofile import read_po
from django.conf import settings
from django.core.management import call_command

ROOT = Path(__file__).resolve().parents[2]
LOCALE = ROOT / "locale"
REQUIRED = {"de", "en", "es", "fr", "it", "nl"}
# {name} (the rule templates' and the push texts' placeholders) and %(name)s (Django templates').
_PLACEHOLDER = re.compile(r"\{\w+\}|%\(\w+\)[sd]")


def _script() -> Any:
    path = ROOT / "scripts" / "compile_messages.py"
    spec = importlib.util.spec_from_file_location("compile_messages", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _catalog(path: Path) -> Catalog:
    with path.open("rb") as source:
        return read_po(source, abort_invalid=True)


def _po(language: str) -> Catalog:
    return _catalog(LOCALE / language / "LC_MESSAGES" / "django.po")


def _entries(catalog: Catalog) -> list[Message]:
    return [message for message in catalog if message.id]


def _placeholders(text: str) -> list[str]:
    return sorted(_PLACEHOLDER.findall(text))


def test_the_service_speaks_the_languages_it_has_a_catalog_for() -> None:
    spoken = {code for code, _ in settings.LANGUAGES}
    catalogs = {path.parent.parent.name for path in LOCALE.glob("*/LC_MESSAGES/django.po")}
    assert spoken >= REQUIRED
    assert spoken == catalogs
    assert settings.LOCALE_PATHS == [LOCALE]


@pytest.mark.parametrize("language", sorted(REQUIRED))
def test_every_text_is_translated_with_its_placeholders(language: str) -> None:
    catalog = _catalog(LOCALE / language / "LC_MESSAGES" / "django.po")
    assert str(catalog.locale) == language
    assert not catalog.fuzzy, "the header is marked fuzzy: Django would skip the catalog's plural rule"
    problems = []
    for message in _entries(catalog):
        ids = message.id if isinstance(message.id, tuple) else (message.id,)
        strings = message.string if isinstance(message.string, tuple) else (message.string,)
        if message.fuzzy:
            problems.append(f"fuzzy: {ids[0]!r}")
        if len(strings) != (catalog.num_plurals if message.pluralizable else 1):
            problems.append(f"{len(strings)} forms for {catalog.num_plurals}: {ids[0]!r}")
        for string in strings:
            if not string.strip():
                problems.append(f"not translated: {ids[0]!r}")
            elif _placeholders(string) != _placeholders(ids[-1 if string is not strings[0] else 0]):
                problems.append(f"placeholders differ: {ids[0]!r} -> {string!r}")
    assert not problems, f"{language}: " + "; ".join(problems)


def test_the_catalogs_say_the_same_msgids() -> None:
    ids = {language: {message.id for message in _entries(_po(language))} for language in sorted(REQUIRED)}
    assert all(found == ids["en"] for found in ids.values()), {
        language: sorted(map(str, found ^ ids["en"])) for language, found in ids.items() if found != ids["en"]
    }


def test_the_installed_mo_files_are_compiled_from_the_po_files() -> None:
    """`make install` compiles them; a .po changed since (a merge, a pull) needs `make install` again."""
    assert _script().main(["--check"]) == 0


def test_every_text_of_the_source_is_in_the_catalogs(tmp_path: Path, settings: Any) -> None:
    """makemessages, as `make messages` runs it, into a temporary directory: a text marked in the code or a
    template and missing from locale/ (or one in locale/ the code no longer has) fails here."""
    if shutil.which("xgettext") is None:
        message = "extracting the source's texts needs GNU gettext's xgettext (apt-get install gettext)"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message)
        pytest.skip(message)
    # makemessages writes to a ./locale it finds, so it runs in a directory of links to the sources.
    tree, out = tmp_path / "tree", tmp_path / "locale"
    tree.mkdir()
    for source in ROOT.iterdir():
        if source.name != "locale" and not source.name.startswith("."):
            (tree / source.name).symlink_to(source)
    settings.LOCALE_PATHS = [out]
    cwd = Path.cwd()
    os.chdir(tree)
    try:
        call_command("makemessages", locale=["en"], symlinks=True, **_script().MAKEMESSAGES)
    finally:
        os.chdir(cwd)
    extracted = {message.id for message in _entries(_catalog(out / "en" / "LC_MESSAGES" / "django.po"))}
    shipped = {message.id for message in _entries(_catalog(LOCALE / "en" / "LC_MESSAGES" / "django.po"))}
    assert extracted - shipped == set(), "texts missing from locale/: run `make messages` and translate them"
    assert shipped - extracted == set(), "texts in locale/ the source no longer has: run `make messages`"
