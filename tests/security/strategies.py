"""Hypothesis strategies shared by the API fuzz tests: nasty strings, random JSON, instants at the edges of
the calendar, near-valid callbacks."""

from __future__ import annotations

import datetime as dt
from datetime import datetime, timedelta

from django.utils import timezone
from hypothesis import strategies as st

# Strings that have broken parsers and databases before: NUL, lone surrogates, huge numbers, RTL marks.
nasty_text = st.one_of(
    st.text(max_size=20),
    st.sampled_from(["", "\x00", "a\x00b", "\ud800", "\u202e", "1e999", "-0", "null", "💥" * 3, " " * 3]),
)
# A URL carries UTF-8: a string with a lone surrogate cannot even be put into one.
url_text = nasty_text.filter(lambda s: not any(0xD800 <= ord(c) <= 0xDFFF for c in s))
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | nasty_text,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(nasty_text, children, max_size=4),
    max_leaves=15,
)
offsets = st.integers(min_value=-(23 * 60 + 59), max_value=23 * 60 + 59).map(lambda m: timedelta(minutes=m))
instants = st.one_of(
    # Near now (valid), far past and far future, at any offset, including the edges of year 1 and 9999.
    st.integers(min_value=-86400 * 2, max_value=86400 * 400).map(
        lambda s: (timezone.now() + timedelta(seconds=s)).isoformat()
    ),
    st.builds(
        lambda moment, off: moment.replace(tzinfo=dt.timezone(off)).isoformat(),
        st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)),
        offsets,
    ),
    st.sampled_from(["9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+23:59", "2030-01-01T00:00:00"]),
    nasty_text,
    json_values,
)
keys = st.one_of(st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9._:@-]{0,30}\Z"), nasty_text, json_values)
targets = st.one_of(
    st.from_regex(r"\Aq\.[a-z]{1,8}\Z"),
    st.sampled_from(
        ["amq.x", "a" * 256, "http://hooks.example.com/x", "http://127.0.0.1/", "file:///etc/passwd"]
    ),
    nasty_text,
    json_values,
)
callbacks = st.one_of(
    st.fixed_dictionaries(
        {"type": st.sampled_from(["rabbitmq", "http", "handler"]) | nasty_text},
        optional={
            "data": st.one_of(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "queue": targets,
                        "url": targets,
                        "name": targets,
                        "payload": json_values,
                        "secret": nasty_text,
                    },
                ),
                json_values,
            )
        },
    ),
    json_values,
)
