"""Sealing and opening records; keys and what is never shown of them."""

from __future__ import annotations

import base64

import pytest

from chatkeep.core import InvalidOption
from chatkeep.encrypted import Keyring
from chatkeep.encrypted.config import parse_keys
from chatkeep.encrypted.layout import MAGIC, Cipher

KEY_A = base64.urlsafe_b64encode(b"a" * 32).decode()
KEY_B = base64.urlsafe_b64encode(b"b" * 32).decode()


def cipher(text: str = f"new:{KEY_B},old:{KEY_A}") -> Cipher:
    return Cipher(parse_keys(text))


def test_a_sealed_record_opens_and_names_its_key() -> None:
    sealed = cipher().seal("s1", "r1", b"hello \x00\xff")
    assert sealed.startswith(MAGIC) and b"hello" not in sealed
    opened = cipher().open("s1", "r1", sealed)
    assert (opened.data, opened.key_id) == (b"hello \x00\xff", "new")


def test_sealing_is_deterministic_so_retries_stay_no_ops() -> None:
    assert cipher().seal("s", "r", b"x") == cipher().seal("s", "r", b"x")
    assert cipher().seal("s", "r", b"x") != cipher().seal("s", "r", b"y")


@pytest.mark.parametrize(("session", "record"), [("s2", "r1"), ("s1", "r2"), ("S1", "r1")])
def test_a_record_moved_elsewhere_does_not_open(session: str, record: str) -> None:
    sealed = cipher().seal("s1", "r1", b"secret")
    with pytest.raises(ValueError, match="does not authenticate"):
        cipher().open(session, record, sealed)


def test_any_changed_byte_is_detected() -> None:
    sealed = cipher().seal("s", "r", b"0123456789" * 5)
    for index in range(len(sealed)):
        damaged = bytearray(sealed)
        damaged[index] ^= 0x01
        with pytest.raises(ValueError):
            cipher().open("s", "r", bytes(damaged))
    for cut in (1, 5, len(sealed) - 1):
        with pytest.raises(ValueError):
            cipher().open("s", "r", sealed[:cut])


def test_old_keys_decrypt_and_only_the_first_encrypts() -> None:
    old_only = cipher(f"old:{KEY_A}")
    sealed = old_only.seal("s", "r", b"x")
    rotated = cipher()  # new first, old after it
    assert rotated.open("s", "r", sealed).key_id == "old"
    assert rotated.key_id_of(rotated.seal("s", "r", b"x")) == "new"
    with pytest.raises(ValueError, match="key id 'old', which is not configured"):
        cipher(f"new:{KEY_B}").open("s", "r", sealed)


def test_plaintext_is_not_an_envelope() -> None:
    with pytest.raises(ValueError, match="not encrypted"):
        cipher().open("s", "r", b'{"type":"message"}')


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "holds no keys"),
        ("nokey", "not 'key_id:key'"),
        (f"bad id:{KEY_A}", "invalid key id"),
        (f"a:{KEY_A},a:{KEY_B}", "appears twice"),
        ("a:c2hvcnQ=", "is 5 bytes"),
        ("a:not*base64!", "not URL-safe base64"),
    ],
)
def test_bad_keys_are_refused_without_echoing_them(text: str, message: str) -> None:
    with pytest.raises(InvalidOption, match=message) as caught:
        parse_keys(text)
    for secret in ("c2hvcnQ", "not*base64", KEY_A, KEY_B):
        assert secret not in str(caught.value)


def test_reprs_show_key_ids_only() -> None:
    keyring = parse_keys(f"new:{KEY_B},old:{KEY_A}")
    for shown in (repr(keyring), repr(cipher()), str(keyring)):
        assert KEY_A not in shown and KEY_B not in shown and "new" in shown


def test_generated_keys_are_accepted() -> None:
    key = Keyring.generate_key()
    assert parse_keys(f"k:{key}").primary == "k"
