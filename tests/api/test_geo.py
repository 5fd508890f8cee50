"""GET /weather (14-day forecast per ZIP, cached an hour per ZIP) and GET /drive-time (minutes
and miles between two points or two addresses), against the fake Open-Meteo, OSRM and
Nominatim of tests/api/fake_geo.py.

Spec: marketplace-api.md sections 4 (Weather, Drive time), 5 (access), 7 (422, 504), 8
(weather cache 1 hour, 14 days; routing timeout 7 seconds); decisions.md section 2
(GEOCODER_URL, ROUTER_URL, WEATHER_URL); the project's docs/decisions.md ("Weather and drive
time").
"""
import math
import re
import time

import pytest

from conftest import Api
from fake_geo import haversine_m
from flow_helpers import UNAUTHORIZED, fresh_zip, private_zip, race
from helpers import error_body


WEATHER_UNAVAILABLE = error_body(503, "Weather service unavailable")
DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
HOUR_MS = 3600 * 1000


def road_miles(lat1, lng1, lat2, lng2, factor=1.3):
    rad = math.pi / 180
    dlat, dlng = (lat2 - lat1) * rad, (lng2 - lng1) * rad
    a = math.sin(dlat / 2) ** 2 + math.cos(lat1 * rad) * math.cos(lat2 * rad) * math.sin(dlng / 2) ** 2
    return 2 * 3958.8 * math.asin(min(1.0, math.sqrt(a))) * factor


def embedded_minutes(miles):
    return max(1, math.ceil(miles / 35 * 60))


def forecast_calls(fake, lat, lng):
    return [c for c in fake.calls("forecast")
            if c["query"]["latitude"] == [f"{lat:.4f}"] and c["query"]["longitude"] == [f"{lng:.4f}"]]


@pytest.fixture(scope="module")
def weather_server(make_server, fake_geo):
    """A server of its own for the cache tests: they move its clock."""
    return make_server(WEATHER_URL=fake_geo.url)


@pytest.fixture
def wapi(weather_server, fake_geo):
    fake_geo.reset()
    yield Api(weather_server)
    fake_geo.reset()


@pytest.fixture(scope="module")
def routing_server(make_server, fake_geo):
    return make_server(ROUTER_URL=fake_geo.url, GEOCODER_URL=fake_geo.url, WEATHER_URL=fake_geo.url)


@pytest.fixture
def rapi(routing_server, fake_geo):
    fake_geo.reset()
    yield Api(routing_server)
    fake_geo.reset()


# ================================================================ weather

def test_weather_needs_a_signed_in_customer_or_provider(api):
    zip_ = fresh_zip()[0]
    r = api.get("/weather", params={"zip": zip_})
    assert r.status_code == 401 and r.json() == UNAUTHORIZED
    r = api.get("/weather", params={"zip": zip_}, token="not-a-token")
    assert r.status_code == 401 and r.json() == UNAUTHORIZED
    for who in (api.register_user(), api.register_provider()):
        r = api.get("/weather", params={"zip": zip_}, token=who["token"])
        assert r.status_code == 200, r.text


@pytest.mark.parametrize("params,error", [
    ({}, "zip: is required"),
    ({"zip": ""}, "zip: must be exactly 5 digits"),
    ({"zip": "1234"}, "zip: must be exactly 5 digits"),
    ({"zip": "123456"}, "zip: must be exactly 5 digits"),
    ({"zip": "1a345"}, "zip: must be exactly 5 digits"),
])
def test_weather_zip_is_validated(api, fake_geo, params, error):
    user = api.register_user()
    before = len(fake_geo.calls("forecast"))
    r = api.get("/weather", params=params, token=user["token"])
    assert r.status_code == 400 and r.json() == error_body(400, error)
    assert len(fake_geo.calls("forecast")) == before


def test_weather_unknown_zip_is_404(api, fake_geo):
    user = api.register_user()
    before = len(fake_geo.calls("forecast"))
    r = api.get("/weather", params={"zip": private_zip()}, token=user["token"])
    assert r.status_code == 404 and r.json() == error_body(404, "Unknown ZIP code")
    assert len(fake_geo.calls("forecast")) == before


def test_weather_forecast_shape_icons_and_request(api, fake_geo):
    zip_, lat, lng = fresh_zip()
    codes = [0, 1, 2, 3, 45, 48, 51, 61, 71, 77, 80, 85, 95, 99]
    fake_geo.set_forecast(lat, lng, [(c, 70.04 + i, 50.26 - i) for i, c in enumerate(codes)])
    user = api.register_user()
    r = api.get("/weather", params={"zip": zip_}, token=user["token"])
    assert r.status_code == 200, r.text
    days = r.json()
    assert len(days) == 14
    icons = ["\u2600\ufe0f", "\U0001F324\ufe0f", "\u26c5", "\u2601\ufe0f", "\U0001F32B\ufe0f", "\U0001F32B\ufe0f",
             "\U0001F326\ufe0f", "\U0001F327\ufe0f", "\u2744\ufe0f", "\u2744\ufe0f", "\U0001F326\ufe0f",
             "\U0001F328\ufe0f", "\u26c8\ufe0f", "\u26c8\ufe0f"]
    for i, day in enumerate(days):
        assert set(day) == {"date", "icon", "maxF", "minF"}
        assert DATE_RE.match(day["date"])
        assert day["icon"] == icons[i]
        assert day["maxF"] == round(70.04 + i, 1) and day["minF"] == round(50.26 - i, 1)
    assert [d["date"] for d in days] == sorted({d["date"] for d in days})
    call = forecast_calls(fake_geo, lat, lng)[-1]["query"]
    assert call["daily"] == ["weather_code,temperature_2m_max,temperature_2m_min"]
    assert call["temperature_unit"] == ["fahrenheit"] and call["forecast_days"] == ["14"]


def test_weather_is_cached_for_an_hour_per_zip(wapi, fake_geo):
    zip_, lat, lng = fresh_zip()
    other, olat, olng = fresh_zip()
    fake_geo.set_forecast(lat, lng, [(0, 80.0, 60.0)] * 14)
    user = wapi.register_user()
    first = wapi.get("/weather", params={"zip": zip_}, token=user["token"]).json()
    fake_geo.set_forecast(lat, lng, [(71, 30.0, 20.0)] * 14)  # upstream changes; the cache holds
    assert wapi.get("/weather", params={"zip": zip_}, token=user["token"]).json() == first
    assert len(forecast_calls(fake_geo, lat, lng)) == 1
    # another ZIP has its own entry
    assert wapi.get("/weather", params={"zip": other}, token=user["token"]).status_code == 200
    assert len(forecast_calls(fake_geo, olat, olng)) == 1
    wapi.advance_clock(HOUR_MS - 60_000)
    assert wapi.get("/weather", params={"zip": zip_}, token=user["token"]).json() == first
    assert len(forecast_calls(fake_geo, lat, lng)) == 1
    wapi.advance_clock(60_000)
    fresh = wapi.get("/weather", params={"zip": zip_}, token=user["token"]).json()
    assert len(forecast_calls(fake_geo, lat, lng)) == 2
    assert fresh[0]["maxF"] == 30.0 and fresh[0]["icon"] == "\u2744\ufe0f"


def test_weather_concurrent_misses_make_one_upstream_call(wapi, weather_server, fake_geo):
    zip_, lat, lng = fresh_zip()
    user = wapi.register_user()
    fake_geo.delay("forecast", 2.0)  # every request arrives while the one fetch is under way
    answers = race(weather_server, [lambda c: c.get("/weather", params={"zip": zip_}, token=user["token"])] * 8)
    assert [r.status_code for r in answers] == [200] * 8
    assert all(r.json() == answers[0].json() for r in answers)
    assert len(forecast_calls(fake_geo, lat, lng)) == 1


def test_weather_concurrent_requests_share_a_failure(wapi, weather_server, fake_geo):
    zip_, lat, lng = fresh_zip()
    user = wapi.register_user()
    fake_geo.delay("forecast", 3.0)
    fake_geo.fail_next("forecast", 1, 500)
    answers = race(weather_server, [lambda c: c.get("/weather", params={"zip": zip_}, token=user["token"])] * 5)
    assert [r.status_code for r in answers] == [503] * 5
    assert len(forecast_calls(fake_geo, lat, lng)) == 1


@pytest.mark.parametrize("mode", [500, 502, 429, 400, "garbage", "shape"])
def test_weather_upstream_failure_is_503_and_not_cached(wapi, fake_geo, mode):
    zip_, lat, lng = fresh_zip()
    user = wapi.register_user()
    fake_geo.fail_next("forecast", 1, mode)
    r = wapi.get("/weather", params={"zip": zip_}, token=user["token"])
    assert r.status_code == 503 and r.json() == WEATHER_UNAVAILABLE
    assert r.headers["Retry-After"] == "5"  # every 503 says when to come back
    assert "secret" not in r.text
    r = wapi.get("/weather", params={"zip": zip_}, token=user["token"])
    assert r.status_code == 200 and len(r.json()) == 14
    assert len(forecast_calls(fake_geo, lat, lng)) == 2


def test_weather_unreachable_service_is_503(server_factory):
    srv = server_factory(WEATHER_URL="http://127.0.0.1:9")
    api = Api(srv)
    user = api.register_user()
    r = api.get("/weather", params={"zip": fresh_zip()[0]}, token=user["token"])
    assert r.status_code == 503 and r.json() == WEATHER_UNAVAILABLE
    assert r.headers["Retry-After"] == "5"


# ================================================================ drive time (embedded estimate)

def test_drive_time_between_coordinates_without_a_router(api):
    (_, lat1, lng1), (_, lat2, lng2) = fresh_zip(), fresh_zip()
    r = api.get("/drive-time", params={"fromLat": lat1, "fromLng": lng1, "toLat": lat2, "toLng": lng2})
    assert r.status_code == 200, r.text
    miles = road_miles(lat1, lng1, lat2, lng2)
    assert r.json() == {"minutes": embedded_minutes(miles), "distanceMi": f"{miles:.1f}"}


def test_drive_time_same_point_and_short_hops(api):
    r = api.get("/drive-time", params={"fromLat": 40.0, "fromLng": -75.0, "toLat": 40.0, "toLng": -75.0})
    assert r.json() == {"minutes": 1, "distanceMi": "0.0"}
    # 10 great-circle miles north: 13 road miles, 22.3 minutes at 35 mph
    lat2 = 40.0 + 10 / 69.093
    r = api.get("/drive-time", params={"fromLat": 40.0, "fromLng": -75.0, "toLat": lat2, "toLng": -75.0})
    assert r.json() == {"minutes": 23, "distanceMi": "13.0"}


def test_drive_time_between_addresses_uses_their_zips_without_a_geocoder(api):
    (z1, lat1, lng1), (z2, lat2, lng2) = fresh_zip(), fresh_zip()
    r = api.get("/drive-time", params={"fromAddress": f"12345 Main St, Springfield {z1}",
                                       "toAddress": f"7 Elm Rd, Shelbyville {z2}-1234"})
    assert r.status_code == 200, r.text
    miles = road_miles(lat1, lng1, lat2, lng2)
    assert r.json() == {"minutes": embedded_minutes(miles), "distanceMi": f"{miles:.1f}"}


@pytest.mark.parametrize("address,field", [
    ("1 Main St, Nowhere", "fromAddress"),          # no ZIP at all
    ("1 Main St 1234567", "fromAddress"),          # digits, but not a 5-digit ZIP
    ("to a private ZIP", "toAddress"),             # a ZIP that is not in the table
])
def test_drive_time_address_that_cannot_be_located_is_422(api, address, field):
    ok = f"1 Main St {fresh_zip()[0]}"
    params = {"fromAddress": address, "toAddress": ok} if field == "fromAddress" else \
        {"fromAddress": ok, "toAddress": f"2 Side St {private_zip()}"}
    r = api.get("/drive-time", params=params)
    assert r.status_code == 422 and r.json() == error_body(422, f"Geocoding failed for {field}")


TOO_FEW = error_body(400, "Give fromLat, fromLng, toLat and toLng, or fromAddress and toAddress")
MIXED = error_body(400, "Give either fromLat, fromLng, toLat and toLng or fromAddress and toAddress, not both")


@pytest.mark.parametrize("params,body", [
    ({}, TOO_FEW),
    ({"fromLat": 40, "fromLng": -75, "toLat": 41}, TOO_FEW),
    ({"fromLng": -75, "toLat": 41, "toLng": -74}, TOO_FEW),
    ({"fromAddress": "1 Main St 10001"}, TOO_FEW),
    ({"toAddress": "1 Main St 10001"}, TOO_FEW),
    ({"fromLat": 40, "fromLng": -75, "toLat": 41, "toLng": -74, "fromAddress": "1 Main St 10001"}, MIXED),
    ({"fromLat": 40, "fromAddress": "1 Main St 10001", "toAddress": "1 Main St 10001"}, MIXED),
    ({"fromLat": 90.5, "fromLng": -75, "toLat": 41, "toLng": -74}, error_body(400, "fromLat: must be between -90 and 90")),
    ({"fromLat": 40, "fromLng": -180.1, "toLat": 41, "toLng": -74},
     error_body(400, "fromLng: must be between -180 and 180")),
    ({"fromLat": 40, "fromLng": -75, "toLat": -91, "toLng": -74}, error_body(400, "toLat: must be between -90 and 90")),
    ({"fromLat": 40, "fromLng": -75, "toLat": 41, "toLng": 181}, error_body(400, "toLng: must be between -180 and 180")),
    ({"fromLat": "north", "fromLng": -75, "toLat": 41, "toLng": -74}, error_body(400, "fromLat: must be a number")),
    ({"fromLat": "", "fromLng": -75, "toLat": 41, "toLng": -74}, error_body(400, "fromLat: must be a number")),
    ({"fromAddress": "", "toAddress": "1 Main St 10001"}, error_body(400, "fromAddress: must not be empty")),
    ({"fromAddress": "1 Main St 10001", "toAddress": "x" * 301},
     error_body(400, "toAddress: must be at most 300 characters")),
])
def test_drive_time_parameters_are_validated(api, params, body):
    r = api.get("/drive-time", params=params)
    assert r.status_code == 400 and r.json() == body


def test_drive_time_bounds_are_inclusive(api):
    r = api.get("/drive-time", params={"fromLat": -90, "fromLng": -180, "toLat": 90, "toLng": 180})
    assert r.status_code == 200, r.text


# ================================================================ drive time with OSRM and Nominatim

def osrm_expected(lat1, lng1, lat2, lng2):
    """What the fake OSRM answers for the points the service sends (6 decimals)."""
    meters = round(haversine_m(*(round(x, 6) for x in (lat1, lng1, lat2, lng2))) * 1.25, 1)
    seconds = round(meters / 13.4112, 1)
    return max(1, math.ceil(seconds / 60)), f"{meters / 1609.344:.1f}"


def test_drive_time_asks_the_router(rapi, fake_geo):
    (_, lat1, lng1), (_, lat2, lng2) = fresh_zip(), fresh_zip()
    r = rapi.get("/drive-time", params={"fromLat": lat1, "fromLng": lng1, "toLat": lat2, "toLng": lng2})
    assert r.status_code == 200, r.text
    minutes, miles = osrm_expected(lat1, lng1, lat2, lng2)
    assert r.json() == {"minutes": minutes, "distanceMi": miles}
    call = fake_geo.calls("route")[-1]
    assert call["path"] == f"/route/v1/driving/{lng1:.6f},{lat1:.6f};{lng2:.6f},{lat2:.6f}"
    assert call["query"] == {"overview": ["false"]}


def test_drive_time_without_a_route_is_422(rapi, fake_geo):
    (_, lat1, lng1), (_, lat2, lng2) = fresh_zip(), fresh_zip()
    fake_geo.no_route((lat1, lng1), (lat2, lng2))
    r = rapi.get("/drive-time", params={"fromLat": lat1, "fromLng": lng1, "toLat": lat2, "toLng": lng2})
    assert r.status_code == 422 and r.json() == error_body(422, "No route found")
    # the other direction has one
    r = rapi.get("/drive-time", params={"fromLat": lat2, "fromLng": lng2, "toLat": lat1, "toLng": lng1})
    assert r.status_code == 200


@pytest.mark.parametrize("mode", [500, 503, "garbage", "shape"])
def test_drive_time_router_failure_is_503(rapi, fake_geo, mode):
    fake_geo.fail_next("route", 1, mode)
    r = rapi.get("/drive-time", params={"fromLat": 40, "fromLng": -75, "toLat": 41, "toLng": -74})
    assert r.status_code == 503 and r.json() == error_body(503, "Routing service unavailable")
    assert "secret" not in r.text


@pytest.mark.engine_independent  # an outbound call's time bound, whatever the engine
def test_drive_time_router_silent_for_7_seconds_is_504(rapi, fake_geo):
    fake_geo.delay("route", 30)  # far longer than the service waits
    started = time.monotonic()
    r = rapi.get("/drive-time", params={"fromLat": 40, "fromLng": -75, "toLat": 41, "toLng": -74})
    elapsed = time.monotonic() - started
    assert r.status_code == 504 and r.json() == error_body(504, "The routing service did not answer within 7 seconds")
    assert 6.9 <= elapsed < 20, elapsed


def test_drive_time_geocodes_addresses(rapi, fake_geo):
    (_, lat1, lng1), (_, lat2, lng2) = fresh_zip(), fresh_zip()
    fake_geo.add_place("350 Fifth Avenue, New York", lat1, lng1)
    fake_geo.add_place("1600 Pennsylvania Ave", lat2, lng2)
    r = rapi.get("/drive-time", params={"fromAddress": "350 Fifth Avenue, New York",
                                        "toAddress": "1600 Pennsylvania Ave"})
    assert r.status_code == 200, r.text
    minutes, miles = osrm_expected(lat1, lng1, lat2, lng2)
    assert r.json() == {"minutes": minutes, "distanceMi": miles}
    queries = [c["query"] for c in fake_geo.calls("search")[-2:]]
    assert [q["q"] for q in queries] == [["350 Fifth Avenue, New York"], ["1600 Pennsylvania Ave"]]
    assert all(q["format"] == ["jsonv2"] for q in queries)


def test_drive_time_geocoder_is_used_instead_of_zips(rapi, fake_geo):
    # with GEOCODER_URL set, a ZIP in the text is not enough: the geocoder decides
    r = rapi.get("/drive-time", params={"fromAddress": "nowhere at all 10001", "toAddress": "also nowhere 10001"})
    assert r.status_code == 422 and r.json() == error_body(422, "Geocoding failed for fromAddress")


@pytest.mark.parametrize("mode", [500, "garbage", "shape"])
def test_drive_time_geocoder_failure_is_422(rapi, fake_geo, mode):
    fake_geo.add_place("known place", 40.0, -75.0)
    fake_geo.fail_next("search", 1, mode)
    r = rapi.get("/drive-time", params={"fromAddress": "known place", "toAddress": "known place"})
    assert r.status_code == 422 and r.json() == error_body(422, "Geocoding failed for fromAddress")
    assert "secret" not in r.text


def test_drive_time_with_a_router_still_validates_first(rapi, fake_geo):
    before = len(fake_geo.calls("route"))
    r = rapi.get("/drive-time", params={"fromLat": 40, "fromLng": -75, "toLat": 41})
    assert r.status_code == 400 and r.json() == TOO_FEW
    assert len(fake_geo.calls("route")) == before
