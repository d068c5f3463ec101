"""Ways to colour the fleet map's cells besides their state, served by the apps above inventory.

The map colours each device by its state; an app that knows more about devices (monitoring: the GPU
utilization Prometheus reports) registers a colouring from its AppConfig.ready(), so inventory imports
no app above it. A colouring is a function that sets its values on the device dicts of one map page
(monitoring.utilization.attach_latest sets `util` and `util_bucket`). An unregistered colouring
leaves the map coloured by state.
"""

_colourings = {}


def register_map_colouring(name, attach):
    """Offer ?colour=`name` on the fleet map: `attach(devices)` decorates a page's device dicts."""
    _colourings[name] = attach


def map_colouring(name):
    """The registered colouring called `name`, or None."""
    return _colourings.get(name)
