"""Local fakes of the three outside geography services the service calls, on one HTTP server:

    GET /v1/forecast                      Open-Meteo's forecast API
    GET /route/v1/driving/<lng>,<lat>;<lng>,<lat>   OSRM's route service
    GET /search                           Nominatim's search API

Each speaks its service's wire format for the calls the service makes:
- Open-Meteo: `latitude` and `longitude` are required (400 `{"error": true, "reason": ...}`
  otherwise, as Open-Meteo answers); `daily` names the variables (`weather_code`,
  `temperature_2m_max`, `temperature_2m_min`), `forecast_days` the count (1..16),
  `temperature_unit=fahrenheit` is echoed in `daily_units`. The answer has Open-Meteo's
  fields: latitude, longitude, generationtime_ms, utc_offset_seconds, timezone, elevation,
  daily_units and daily (`time` plus one array per variable).
- OSRM: `{"code": "Ok", "routes": [{"distance": m, "duration": s, "legs": [...], ...}],
  "waypoints": [...]}`; errors are HTTP 400 with a `code` (InvalidUrl, InvalidQuery, NoRoute)
  and a `message`, as osrm-routed answers. The fake's road distance is 1.25 x the
  great-circle distance, driven at 13.4112 m/s (30 mph).
- Nominatim: `q` and `format=jsonv2` give a JSON array of places (`lat` and `lon` as strings,
  `display_name`, `place_id`, ...), empty when nothing matches; without `q`, 400
  `{"error": {"code": 400, "message": "Nothing to search for."}}`.

Test controls (thread-safe):
- `set_forecast(lat, lng, days)`: the days for a point (matched to 4 decimals, as the service
  sends them); each day a (weather_code, max_f, min_f) tuple. Other points get
  `default_days` (cloudy, 45/33 F: neither snow nor a warm spell).
- `add_place(query, lat, lng)`: what /search finds for a query (case-insensitive).
- `no_route((lat, lng), (lat, lng))` or `no_route_everywhere = True`: OSRM answers NoRoute.
- `fail_next(service, count=1, mode=500)`: the next `count` calls to "forecast", "route" or
  "search" answer with that HTTP status, or mode "garbage" (200, not JSON), "shape" (200, JSON
  that is not the service's answer).
- `delay(service, seconds)`: hold every answer of a service.
- `calls(service)`: the request log of a service, each {path, query (parse_qs), at}.
"""
import json
import math
import threading
import time
import urllib.parse
from datetime import date, timedelta

from fake_http import QuietHandler, ServedFake

DEFAULT_DAY = (3, 45.0, 33.0)
OSRM_SPEED_MS = 13.4112
ROAD_FACTOR = 1.25


def haversine_m(lat1, lng1, lat2, lng2):
    rad = math.pi / 180
    dlat, dlng = (lat2 - lat1) * rad, (lng2 - lng1) * rad
    a = math.sin(dlat / 2) ** 2 + math.cos(lat1 * rad) * math.cos(lat2 * rad) * math.sin(dlng / 2) ** 2
    return 2 * 6371008.8 * math.asin(min(1.0, math.sqrt(a)))


def point_key(lat, lng):
    return (round(float(lat), 4), round(float(lng), 4))


class FakeGeo(ServedFake):
    def __init__(self):
        self.lock = threading.Lock()
        self.forecasts = {}
        self.default_days = [DEFAULT_DAY] * 16
        self.places = {}
        self.no_routes = set()
        self.no_route_everywhere = False
        self.failures = {}
        self.delays = {}
        self.log = []

    # -------------------------------------------------------------- lifecycle

    def start(self):
        fake = self

        class Handler(QuietHandler):
            def do_GET(self):
                status, body = fake.handle(self.path)
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json; charset=utf-8")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass  # the client gave up (timeout tests)

        return self.serve(Handler, "fake-geo")

    # -------------------------------------------------------------- controls

    def set_forecast(self, lat, lng, days):
        with self.lock:
            self.forecasts[point_key(lat, lng)] = list(days)

    def add_place(self, query, lat, lng):
        with self.lock:
            self.places[query.strip().lower()] = (lat, lng)

    def no_route(self, a, b):
        with self.lock:
            self.no_routes.add((point_key(*a), point_key(*b)))

    def fail_next(self, service, count=1, mode=500):
        with self.lock:
            self.failures[service] = [mode] * count

    def delay(self, service, seconds):
        with self.lock:
            self.delays[service] = seconds

    def reset(self):
        with self.lock:
            self.failures.clear()
            self.delays.clear()
            self.no_route_everywhere = False

    def calls(self, service):
        with self.lock:
            return [c for c in self.log if c["service"] == service]

    # -------------------------------------------------------------- dispatch

    def handle(self, raw_path):
        url = urllib.parse.urlsplit(raw_path)
        query = urllib.parse.parse_qs(url.query)
        if url.path == "/v1/forecast":
            service = "forecast"
        elif url.path.startswith("/route/v1/"):
            service = "route"
        elif url.path == "/search":
            service = "search"
        else:
            return 404, {"error": "Not found"}
        with self.lock:
            self.log.append({"service": service, "path": url.path, "query": query, "at": time.time()})
            pending = self.failures.get(service) or []
            mode = pending.pop(0) if pending else None
            pause = self.delays.get(service, 0)
        if pause:
            time.sleep(pause)
        if mode == "garbage":
            return 200, b"<html>upstream proxy error: secret-upstream-detail</html>"
        if mode == "shape":
            return 200, {"unexpected": "secret-upstream-detail"}
        if mode is not None:
            return int(mode), {"error": True, "reason": "secret-upstream-detail"}
        return getattr(self, "_" + service)(url.path, query)

    # -------------------------------------------------------------- Open-Meteo

    def _forecast(self, path, q):
        def one(name):
            v = q.get(name)
            return v[0] if v else None

        try:
            lat, lng = float(one("latitude")), float(one("longitude"))
        except (TypeError, ValueError):
            return 400, {"error": True, "reason": "Parameter 'latitude' and 'longitude' must be set"}
        if not (-90 <= lat <= 90 and -180 <= lng <= 180):
            return 400, {"error": True, "reason": "Latitude must be in range of -90 to 90°."}
        variables = [v for v in (one("daily") or "").split(",") if v]
        days_n = int(one("forecast_days") or 7)
        if not 0 <= days_n <= 16:
            return 400, {"error": True, "reason": "Forecast days is invalid. Allowed range 0 to 16."}
        known = {"weather_code", "temperature_2m_max", "temperature_2m_min"}
        for v in variables:
            if v not in known:
                return 400, {"error": True,
                             "reason": f"Cannot initialize WeatherVariable from invalid String value {v}."}
        fahrenheit = one("temperature_unit") == "fahrenheit"
        with self.lock:
            days = self.forecasts.get(point_key(lat, lng), self.default_days)[:days_n]
        start = date.today()
        daily = {"time": [(start + timedelta(days=i)).isoformat() for i in range(len(days))]}
        units = {"time": "iso8601"}
        for v in variables:
            if v == "weather_code":
                daily[v] = [d[0] for d in days]
                units[v] = "wmo code"
            else:
                idx = 1 if v.endswith("max") else 2
                daily[v] = [d[idx] if fahrenheit else round((d[idx] - 32) / 1.8, 1) for d in days]
                units[v] = "°F" if fahrenheit else "°C"
        return 200, {"latitude": lat, "longitude": lng, "generationtime_ms": 0.05, "utc_offset_seconds": 0,
                     "timezone": "GMT", "timezone_abbreviation": "GMT", "elevation": 10.0,
                     "daily_units": units, "daily": daily}

    # -------------------------------------------------------------- OSRM

    def _route(self, path, q):
        parts = path.split("/")
        if len(parts) != 5 or parts[3] not in ("driving", "car"):
            return 400, {"code": "InvalidUrl", "message": f"URL string malformed close to position {len(path)}"}
        try:
            pts = [tuple(float(x) for x in p.split(",")) for p in parts[4].split(";")]
            assert len(pts) == 2 and all(len(p) == 2 for p in pts)
        except (ValueError, AssertionError):
            return 400, {"code": "InvalidQuery", "message": "Query string malformed close to position 0"}
        (lng1, lat1), (lng2, lat2) = pts
        with self.lock:
            blocked = self.no_route_everywhere or (point_key(lat1, lng1), point_key(lat2, lng2)) in self.no_routes
        if blocked:
            return 400, {"code": "NoRoute", "message": "Impossible route between points"}
        meters = round(haversine_m(lat1, lng1, lat2, lng2) * ROAD_FACTOR, 1)
        seconds = round(meters / OSRM_SPEED_MS, 1)
        leg = {"steps": [], "summary": "", "weight": seconds, "duration": seconds, "distance": meters}
        waypoints = [{"hint": "", "distance": 0.0, "name": "", "location": [lng1, lat1]},
                     {"hint": "", "distance": 0.0, "name": "", "location": [lng2, lat2]}]
        return 200, {"code": "Ok", "routes": [{"legs": [leg], "weight_name": "routability", "weight": seconds,
                                               "duration": seconds, "distance": meters}],
                     "waypoints": waypoints}

    # -------------------------------------------------------------- Nominatim

    def _search(self, path, q):
        text = (q.get("q") or [""])[0].strip()
        if not text:
            return 400, {"error": {"code": 400, "message": "Nothing to search for."}}
        with self.lock:
            hit = self.places.get(text.lower())
        if not hit:
            return 200, []
        lat, lng = hit
        return 200, [{"place_id": 1000 + len(text), "licence": "Data © OpenStreetMap contributors, ODbL 1.0.",
                      "osm_type": "way", "osm_id": 42, "lat": f"{lat:.7f}", "lon": f"{lng:.7f}",
                      "category": "building", "type": "house", "place_rank": 30, "importance": 0.1,
                      "addresstype": "building", "name": "", "display_name": text,
                      "boundingbox": [f"{lat - 0.001:.7f}", f"{lat + 0.001:.7f}", f"{lng - 0.001:.7f}",
                                      f"{lng + 0.001:.7f}"]}]
