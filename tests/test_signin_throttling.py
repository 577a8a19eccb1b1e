"""Sign-in is throttled without handing anyone a denial of service: 5 failures for one account
from one address pause that pair, 20 failures from one address (whatever the accounts) pause the
address, for a fixed 15 minutes that tries during the pause do not extend; the sign-in page then
answers 429 with the pause in words, even for the right password. A right password from another
address is never refused because of someone else's failures, and X-Forwarded-For counts only
through VERSIONS_PROXY_COUNT proxies. Every failure is in a log the admin reads; the count lives
in the database, so it holds across server processes."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from axes.models import AccessAttempt, AccessFailureLog
from django.core.cache import cache

from versions.views.signin import SIGNIN_ADDRESS_LOCKED, SIGNIN_LOCKED

LOGIN = "/accounts/login/"
PASSWORD = "correct horse battery staple"
LOCKED = SIGNIN_LOCKED.format(minutes=15)
ADDRESS_LOCKED = SIGNIN_ADDRESS_LOCKED.format(minutes=15)


@pytest.fixture(autouse=True)
def quick_hashing(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def ana(django_user_model):
    return django_user_model.objects.create_user("ana", password=PASSWORD)


def sign_in(client, username, password, address="10.0.0.1", **headers):
    data = {"username": username, "password": password}
    return client.post(LOGIN, data, REMOTE_ADDR=address, **headers)


def test_a_normal_sign_in_works(client, ana):
    response = sign_in(client, "ana", PASSWORD)
    assert response.status_code == 302
    assert client.session.get("_auth_user_id") == str(ana.pk)


def test_a_few_wrong_passwords_then_the_right_one_still_signs_in(client, ana):
    for _ in range(4):
        assert sign_in(client, "ana", "wrong").status_code == 200
    assert sign_in(client, "ana", PASSWORD).status_code == 302


def test_five_failures_for_an_account_from_one_address_pause_that_pair(client, ana):
    answers = [sign_in(client, "ana", "wrong") for _ in range(5)]
    assert [a.status_code for a in answers] == [200, 200, 200, 200, 429]

    right = sign_in(client, "ana", PASSWORD)

    assert right.status_code == 429
    assert LOCKED in right.content.decode()
    assert "_auth_user_id" not in client.session


def test_a_right_password_from_another_address_signs_in_whatever_failed_elsewhere(client, ana):
    for n in range(10):
        for _ in range(5):
            sign_in(client, "ana", "wrong", address=f"10.5.5.{n}")

    assert sign_in(client, "ana", PASSWORD, address="10.9.9.9").status_code == 302


def test_forged_forwarded_addresses_neither_lock_the_account_nor_dodge_the_pause(client, ana):
    for n in range(5):
        sign_in(client, "ana", "wrong", address="10.6.6.6", HTTP_X_FORWARDED_FOR=f"10.0.0.{n}")

    forged = sign_in(client, "ana", PASSWORD, address="10.6.6.6", HTTP_X_FORWARDED_FOR="10.0.0.9")
    assert forged.status_code == 429
    assert sign_in(client, "ana", PASSWORD, address="10.1.1.1").status_code == 302
    assert set(AccessFailureLog.objects.values_list("ip_address", flat=True)) == {"10.6.6.6"}


def test_failures_for_other_accounts_do_not_refuse_a_right_password_from_that_address(client, ana):
    for n in range(5):
        sign_in(client, f"guess-{n}", "wrong", address="10.6.6.6")

    assert sign_in(client, "ana", PASSWORD, address="10.6.6.6").status_code == 302


def test_twenty_failures_from_one_address_across_accounts_pause_that_address(client, ana):
    for n in range(20):
        sign_in(client, f"guess-{n % 4}", "wrong", address="10.6.6.6")

    refused = sign_in(client, "ana", PASSWORD, address="10.6.6.6")
    assert refused.status_code == 429
    assert ADDRESS_LOCKED in refused.content.decode()
    assert sign_in(client, "ana", PASSWORD, address="10.1.1.1").status_code == 302


def test_tries_during_the_pause_do_not_make_it_longer(client, ana, settings):
    settings.AXES_COOLOFF_TIME = timedelta(seconds=3)
    for _ in range(5):
        sign_in(client, "ana", "wrong")
    locked_at = time.monotonic()
    time.sleep(1.5)
    for _ in range(3):
        assert sign_in(client, "ana", "wrong").status_code == 429
    assert sign_in(client, "ana", PASSWORD).status_code == 429

    time.sleep(max(0.0, locked_at + 3.3 - time.monotonic()))

    assert sign_in(client, "ana", PASSWORD).status_code == 302


def test_the_lock_out_message_is_in_words_on_the_sign_in_page(client, ana):
    for _ in range(5):
        response = sign_in(client, "ana", "wrong")
    page = response.content.decode()
    assert "Too many failed sign-ins for this account from this address" in page
    assert "paused for 15 minutes after the last failed try" in page
    assert "tries during the pause do not make it longer" in page
    assert 'name="password"' in page  # still the sign-in page, not a bare error


def test_every_failure_is_in_a_log_the_admin_reads(client, ana, django_user_model):
    for _ in range(3):
        sign_in(client, "ana", "wrong", address="10.2.2.2")
    sign_in(client, "nobody", "wrong", address="10.3.3.3")

    failures = list(AccessFailureLog.objects.values_list("username", "ip_address"))
    assert sorted(failures) == sorted([("ana", "10.2.2.2")] * 3 + [("nobody", "10.3.3.3")])
    admin = django_user_model.objects.create_superuser("root", password="x" * 20)
    client.force_login(admin)
    listing = client.get("/admin/axes/accessfailurelog/")
    assert listing.status_code == 200
    assert "10.2.2.2" in listing.content.decode()


def test_the_count_is_kept_in_the_database_not_in_one_process(client, ana):
    for _ in range(5):
        sign_in(client, "ana", "wrong")
    cache.clear()  # nothing per process or in a local cache carries the lock

    assert AccessAttempt.objects.filter(username="ana").exists()
    assert sign_in(client, "ana", PASSWORD).status_code == 429
    AccessAttempt.objects.all().delete()  # what the admin's "delete" lifts
    assert sign_in(client, "ana", PASSWORD).status_code == 302


def test_the_admin_sign_in_is_throttled_too(client, django_user_model):
    django_user_model.objects.create_superuser("root", password=PASSWORD)
    for _ in range(5):
        client.post("/admin/login/", {"username": "root", "password": "wrong"})
    response = client.post("/admin/login/", {"username": "root", "password": PASSWORD})
    assert response.status_code == 429


@pytest.mark.parametrize(
    ("count", "forwarded", "expected"),
    [
        (0, "1.1.1.1", "127.0.0.1"),
        (1, "6.6.6.6, 1.1.1.1", "1.1.1.1"),
        (2, "6.6.6.6, 1.1.1.1, 10.0.0.2", "1.1.1.1"),
        (1, "", "127.0.0.1"),
    ],
)
def test_behind_proxies_failures_count_by_the_address_the_outer_proxy_saw(
    rf, settings, count, forwarded, expected
):
    from versions.views.signin import client_address

    settings.VERSIONS_PROXY_COUNT = count
    request = rf.post(LOGIN, HTTP_X_FORWARDED_FOR=forwarded)
    assert client_address(request) == expected
