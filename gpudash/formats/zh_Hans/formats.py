# Overrides Django's zh_Hans number format (see FORMAT_MODULE_PATH in gpudash/settings.py); the
# date and time formats not named here stay Django's.
DECIMAL_SEPARATOR = "."
THOUSAND_SEPARATOR = ","
NUMBER_GROUPING = 3
