"""Settings read from environment variables, for gpudash/settings.py and accounts/config.py.

No Django imports: it runs while the settings load. A value that a setting cannot take stops the
start with the variable's name and what it takes (not Python's bare "could not convert string to
float"), and is never read as something else: a typo in an on/off switch is not "off", and NaN,
infinity or a negative number of seconds is refused (a NaN grace compares false with every age).
Written here rather than taken from django-environ or environs: those convert, but neither refuses
NaN or names the variable in every error, and four small parsers are all the settings need.
"""

import math
import os

TRUE = ("1", "true", "yes", "on")
FALSE = ("0", "false", "no", "off")


class ConfigError(ValueError):
    """A setting from the environment is missing or malformed; the message names the variable."""


def env_bool(name, default=False, env=None):
    """An on/off switch: 1/0, true/false, yes/no, on/off (any case); unset or empty: `default`."""
    value = (os.environ if env is None else env).get(name, "").strip()
    if not value:
        return default
    if value.lower() in TRUE:
        return True
    if value.lower() in FALSE:
        return False
    raise ConfigError(f"{name}={value!r}: expected on/off (1/0, true/false)")


def env_choice(name, choices, env=None):
    """One of `choices` (any case); unset or empty: the first."""
    value = ((os.environ if env is None else env).get(name) or choices[0]).strip().lower()
    if value not in choices:
        raise ConfigError(f"{name}={value!r}: expected one of {', '.join(choices)}")
    return value


def env_number(name, default, *, integer=False, positive=False, unit="seconds", env=None):
    """A finite number, 0 or more (more than 0 with `positive`); unset or empty: `default`. `unit`
    only words the error ("a number of seconds")."""
    raw = (os.environ if env is None else env).get(name, "").strip()
    if not raw:
        return default
    kind = "a whole number" if integer else "a number"
    try:
        value = int(raw) if integer else float(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r}: expected {kind} of {unit}") from None
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        bound = "more than 0" if positive else "0 or more"
        raise ConfigError(f"{name}={raw!r}: expected {kind} of {unit}, {bound}")
    return value
