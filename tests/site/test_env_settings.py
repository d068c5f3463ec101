"""Settings from environment variables: a value a setting cannot take stops the start, naming the
variable; nothing is read as something else."""

import os
import subprocess
import sys

import pytest

from mirror.envconfig import ConfigError, env_bool, env_choice, env_number
from tests.browser import ROOT


@pytest.mark.parametrize(
    ("raw", "kwargs", "expected"),
    [
        (None, {}, 7.5),  # unset: the default
        ("", {}, 7.5),  # set but empty: the default too
        (" 12 ", {}, 12.0),
        ("0", {}, 0.0),
        ("1e3", {}, 1000.0),
        ("4", {"integer": True}, 4),
    ],
)
def test_numbers_read(raw, kwargs, expected):
    env = {} if raw is None else {"X_SECONDS": raw}
    value = env_number("X_SECONDS", 7.5, env=env, **kwargs)
    assert value == expected and type(value) is type(expected)


@pytest.mark.parametrize(
    ("raw", "kwargs", "message"),
    [
        ("soon", {}, "X_SECONDS='soon': expected a number of seconds"),
        ("nan", {}, "X_SECONDS='nan': expected a number of seconds, 0 or more"),
        ("inf", {}, "X_SECONDS='inf': expected a number of seconds, 0 or more"),
        ("-1", {}, "X_SECONDS='-1': expected a number of seconds, 0 or more"),
        ("0", {"positive": True}, "X_SECONDS='0': expected a number of seconds, more than 0"),
        ("2.5", {"integer": True, "unit": "rows"}, "X_SECONDS='2.5': expected a whole number of rows"),
    ],
)
def test_bad_numbers_are_refused_by_name(raw, kwargs, message):
    with pytest.raises(ConfigError) as exc:
        env_number("X_SECONDS", 1.0, env={"X_SECONDS": raw}, **kwargs)
    assert str(exc.value) == message


def test_switches_and_choices():
    assert [env_bool("S", False, {"S": v}) for v in ("1", "TRUE", " yes", "On")] == [True] * 4
    assert [env_bool("S", True, {"S": v}) for v in ("0", "false", "No", "off")] == [False] * 4
    assert env_bool("S", True, {}) is True and env_bool("S", False, {"S": ""}) is False
    with pytest.raises(ConfigError, match="S='ture': expected on/off"):
        env_bool("S", False, {"S": "ture"})  # a typo is not "off"
    assert (
        env_choice("C", ("mapped", "all"), {"C": "ALL"}) == "all" and env_choice("C", ("mapped", "all"), {}) == "mapped"
    )
    with pytest.raises(ConfigError, match="expected one of mapped, all"):
        env_choice("C", ("mapped", "all"), {"C": "some"})


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("GPUDASH_LEASE_SECONDS", "ten", "GPUDASH_LEASE_SECONDS='ten': expected a number of seconds"),
        ("GPUDASH_PENDING_GRACE", "nan", "GPUDASH_PENDING_GRACE='nan': expected a number of seconds, 0 or more"),
        (
            "GPUDASH_USAGE_RETENTION_DAYS",
            "0",
            "GPUDASH_USAGE_RETENTION_DAYS='0': expected a whole number of days, more than 0",
        ),
        ("DEBUG", "ture", "DEBUG='ture': expected on/off"),
    ],
)
def test_a_bad_variable_stops_the_start_with_its_name(tmp_path, name, value, message):
    """What an operator sees: `manage.py` (the web server and the workers load the same settings)
    exits with the variable and what it takes, before it serves or syncs anything."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUDASH_TEST")}
    env.update(DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}", GPUDASH_DATA_DIR=str(tmp_path), **{name: value})
    run = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert run.returncode != 0
    assert message in run.stderr.splitlines()[-1], run.stderr[-2000:]
