"""The event catalogue: real past disasters, by type, with the real coordinates of an affected place.

Scenes built for these events are *synthetic scenes at real locations*: the coordinate reference
system, georeferencing and hazard type are those of the real event; the terrain, buildings, roads
and damage are generated (see ``scenes.py``), except where a real layer ships offline.
"""

from __future__ import annotations

from dataclasses import dataclass

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


_E = Event
EVENTS: tuple[Event, ...] = (
    # flood
    _E("pakistan-2022-flood", "flood", "Dadu, Sindh", "Pakistan", "2022-08-30", 26.7319, 67.7750),
    _E("ahr-2021-flood", "flood", "Bad Neuenahr-Ahrweiler", "Germany", "2021-07-15", 50.5450, 7.1130),
    _E("emilia-romagna-2023-flood", "flood", "Faenza", "Italy", "2023-05-17", 44.2856, 11.8833),
    _E("kerala-2018-flood", "flood", "Chengannur", "India", "2018-08-17", 9.3180, 76.6110),
    _E("maiduguri-2024-flood", "flood", "Maiduguri", "Nigeria", "2024-09-10", 11.8464, 13.1571),
    _E("valencia-2024-flood", "flood", "Paiporta", "Spain", "2024-10-30", 39.4280, -0.4180),
    _E("helsinki-2005-storm-surge", "flood", "Kruununhaka, Helsinki", "Finland", "2005-01-09", 60.1716, 24.9443),
    _E("estes-park-2013-flood", "flood", "Estes Park, Colorado", "United States", "2013-09-12", 40.3772, -105.5217),
    # earthquake
    _E("turkiye-2023-earthquake", "earthquake", "Antakya, Hatay", "Turkiye", "2023-02-06", 36.2021, 36.1600),
    _E("nepal-2015-earthquake", "earthquake", "Kathmandu", "Nepal", "2015-04-25", 27.7041, 85.3070),
    _E("haiti-2010-earthquake", "earthquake", "Port-au-Prince", "Haiti", "2010-01-12", 18.5392, -72.3350),
    _E("morocco-2023-earthquake", "earthquake", "Amizmiz, Al Haouz", "Morocco", "2023-09-08", 31.2217, -8.2400),
    _E("noto-2024-earthquake", "earthquake", "Wajima", "Japan", "2024-01-01", 37.3906, 136.8992),
    _E("amatrice-2016-earthquake", "earthquake", "Amatrice", "Italy", "2016-08-24", 42.6286, 13.2919),
    # wildfire
    _E("lahaina-2023-wildfire", "wildfire", "Lahaina, Maui", "United States", "2023-08-08", 20.8783, -156.6825),
    _E("camp-fire-2018-wildfire", "wildfire", "Paradise, California", "United States", "2018-11-08", 39.7596,
       -121.6219),
    _E("mati-2018-wildfire", "wildfire", "Mati, Attica", "Greece", "2018-07-23", 38.0480, 23.9960),
    _E("jasper-2024-wildfire", "wildfire", "Jasper, Alberta", "Canada", "2024-07-24", 52.8737, -118.0814),
    _E("tubbs-2017-wildfire", "wildfire", "Coffey Park, Santa Rosa", "United States", "2017-10-09", 38.4830,
       -122.7500),
    # tropical cyclone
    _E("haiyan-2013-cyclone", "tropical_cyclone", "Tacloban", "Philippines", "2013-11-08", 11.2440, 125.0040),
    _E("maria-2017-cyclone", "tropical_cyclone", "San Juan", "Puerto Rico", "2017-09-20", 18.4655, -66.1057),
    _E("idai-2019-cyclone", "tropical_cyclone", "Beira", "Mozambique", "2019-03-14", -19.8436, 34.8389),
    _E("ian-2022-cyclone", "tropical_cyclone", "Fort Myers Beach, Florida", "United States", "2022-09-28", 26.4520,
       -81.9480),
    _E("michael-2018-cyclone", "tropical_cyclone", "Mexico Beach, Florida", "United States", "2018-10-10", 29.9480,
       -85.4200),
    _E("harvey-2017-cyclone", "tropical_cyclone", "Houston, Texas", "United States", "2017-08-27", 29.7604, -95.3698),
    # tsunami
    _E("tohoku-2011-tsunami", "tsunami", "Rikuzentakata", "Japan", "2011-03-11", 39.0150, 141.6300),
    _E("aceh-2004-tsunami", "tsunami", "Banda Aceh", "Indonesia", "2004-12-26", 5.5483, 95.3238),
    _E("palu-2018-tsunami", "tsunami", "Palu, Central Sulawesi", "Indonesia", "2018-09-28", -0.8917, 119.8707),
    _E("tonga-2022-tsunami", "tsunami", "Nuku'alofa", "Tonga", "2022-01-15", -21.1394, -175.2018),
    # volcanic eruption
    _E("la-palma-2021-eruption", "volcanic_eruption", "Todoque, La Palma", "Spain", "2021-09-19", 28.6160,
       -17.9020),
    _E("nyiragongo-2021-eruption", "volcanic_eruption", "Goma", "DR Congo", "2021-05-22", -1.6792, 29.2228),
    _E("fuego-2018-eruption", "volcanic_eruption", "San Miguel Los Lotes", "Guatemala", "2018-06-03", 14.4330,
       -90.8330),
    _E("kilauea-2018-eruption", "volcanic_eruption", "Leilani Estates, Hawaii", "United States", "2018-05-03",
       19.4600, -154.9100),
    _E("semeru-2021-eruption", "volcanic_eruption", "Curah Kobokan, Lumajang", "Indonesia", "2021-12-04",
       -8.1400, 112.9400),
    _E("grindavik-2024-eruption", "volcanic_eruption", "Grindavik", "Iceland", "2024-01-14", 63.8424, -22.4338),
    # landslide
    _E("wayanad-2024-landslide", "landslide", "Mundakkai, Wayanad", "India", "2024-07-30", 11.4900, 76.1500),
    _E("oso-2014-landslide", "landslide", "Oso, Washington", "United States", "2014-03-22", 48.2820, -121.8480),
    _E("atami-2021-landslide", "landslide", "Atami", "Japan", "2021-07-03", 35.1180, 139.0770),
    _E("xinmo-2017-landslide", "landslide", "Xinmo, Maoxian", "China", "2017-06-24", 32.0690, 103.6620),
    _E("enga-2024-landslide", "landslide", "Yambali, Enga", "Papua New Guinea", "2024-05-24", -5.3800, 143.5200),
    # tornado
    _E("joplin-2011-tornado", "tornado", "Joplin, Missouri", "United States", "2011-05-22", 37.0842, -94.5133),
    _E("moore-2013-tornado", "tornado", "Moore, Oklahoma", "United States", "2013-05-20", 35.3395, -97.4867),
    _E("mayfield-2021-tornado", "tornado", "Mayfield, Kentucky", "United States", "2021-12-10", 36.7418, -88.6367),
    _E("rolling-fork-2023-tornado", "tornado", "Rolling Fork, Mississippi", "United States", "2023-03-24",
       32.9068, -90.8782),
    _E("tuscaloosa-2011-tornado", "tornado", "Tuscaloosa, Alabama", "United States", "2011-04-27", 33.2098,
       -87.5692),
    # industrial explosion
    _E("beirut-2020-explosion", "industrial_explosion", "Port of Beirut", "Lebanon", "2020-08-04", 33.9010, 35.5190),
    _E("tianjin-2015-explosion", "industrial_explosion", "Binhai, Tianjin", "China", "2015-08-12", 39.0390,
       117.7380),
    _E("west-2013-explosion", "industrial_explosion", "West, Texas", "United States", "2013-04-17", 31.8160,
       -97.0970),
    _E("lac-megantic-2013-explosion", "industrial_explosion", "Lac-Megantic, Quebec", "Canada", "2013-07-06",
       45.5780, -70.8850),
    _E("buncefield-2005-explosion", "industrial_explosion", "Hemel Hempstead", "United Kingdom", "2005-12-11",
       51.7650, -0.4280),
    # dam failure
    _E("brumadinho-2019-dam-failure", "dam_failure", "Brumadinho", "Brazil", "2019-01-25", -20.1190, -44.1210),
    _E("derna-2023-dam-failure", "dam_failure", "Derna", "Libya", "2023-09-11", 32.7570, 22.6370),
    _E("kakhovka-2023-dam-failure", "dam_failure", "Oleshky", "Ukraine", "2023-06-06", 46.6200, 32.7200),
    _E("mariana-2015-dam-failure", "dam_failure", "Bento Rodrigues", "Brazil", "2015-11-05", -20.2290, -43.4220),
    _E("attapeu-2018-dam-failure", "dam_failure", "Sanamxay, Attapeu", "Laos", "2018-07-23", 14.7900, 106.6900),
)

EVENTS_BY_ID = {event.id: event for event in EVENTS}


def get_event(event_id: str) -> Event:
    """The catalogue event ``event_id``; ``KeyError`` lists a few known ids when it is unknown."""
    try:
        return EVENTS_BY_ID[event_id]
    except KeyError:
        raise KeyError(f"unknown event {event_id!r}; known events include "
                       f"{', '.join(list(EVENTS_BY_ID)[:6])}, ... ({len(EVENTS)} in all)") from None
