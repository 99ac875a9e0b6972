"""The event catalogue: real past disasters, by type, with the real coordinates of an affected place.

The rows are the curated file ``data/disaster/events.csv`` (read once, on import of this module).

Scenes built for these events are *synthetic scenes at real locations*: the coordinate reference
system, georeferencing and hazard type are those of the real event; the terrain, buildings, roads
and damage are generated (see ``scenes.py``), except where a real layer ships offline.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from gauntlet.curated import curated_path

HAZARD_TYPES = ("flood", "earthquake", "wildfire", "tropical_cyclone", "tsunami", "volcanic_eruption",
                "landslide", "tornado", "industrial_explosion", "dam_failure")


@dataclass(frozen=True)
class Event:
    """One real past event: where (WGS84 degrees), when, and what kind of hazard."""

    id: str
    hazard: str
    place: str
    country: str
    date: str
    lat: float
    lon: float

    @property
    def utm_epsg(self) -> int:
        """EPSG code of the UTM zone holding the event (WGS84 / UTM, north 326xx or south 327xx)."""
        return utm_epsg(self.lat, self.lon)


def utm_epsg(lat: float, lon: float) -> int:
    """EPSG code of the standard UTM zone holding (lat, lon)."""
    if not (-80.0 <= lat <= 84.0 and -180.0 <= lon <= 180.0):
        raise ValueError(f"({lat}, {lon}) is outside the UTM latitude band or not a valid coordinate")
    zone = min(int((lon + 180.0) // 6.0) + 1, 60)
    return (32600 if lat >= 0 else 32700) + zone


CATALOGUE_FILE = "disaster/events.csv"  # curated input: a builder reading the catalogue names it in its key


def load_events(path: Path | None = None) -> tuple[Event, ...]:
    """The catalogue's rows (``data/disaster/events.csv`` unless ``path``), in file order, checked: a
    hand edit with an unknown hazard, a coordinate outside the UTM band or a repeated id fails here."""
    path = path or curated_path(CATALOGUE_FILE)
    with open(path, encoding="utf-8", newline="") as handle:
        rows = csv.DictReader(line for line in handle if not line.startswith("#"))
        events = tuple(Event(row["id"], row["hazard"], row["place"], row["country"], row["date"], float(row["lat"]),
                             float(row["lon"])) for row in rows)
    for event in events:
        if event.hazard not in HAZARD_TYPES:
            raise ValueError(f"{path}: event {event.id!r} has hazard {event.hazard!r}, not one of {HAZARD_TYPES}")
        utm_epsg(event.lat, event.lon)
    if len({event.id for event in events}) != len(events):
        raise ValueError(f"{path}: an event id appears twice")
    return events


EVENTS: tuple[Event, ...] = load_events()
EVENTS_BY_ID = {event.id: event for event in EVENTS}


def get_event(event_id: str) -> Event:
    """The catalogue event ``event_id``; ``KeyError`` lists a few known ids when it is unknown."""
    try:
        return EVENTS_BY_ID[event_id]
    except KeyError:
        raise KeyError(f"unknown event {event_id!r}; known events include "
                       f"{', '.join(list(EVENTS_BY_ID)[:6])}, ... ({len(EVENTS)} in all)") from None
