"""Addresses pickled with integer socket kinds (``supervisors/_tcpaddr.py``,
``install_address_patch``): smaller and quicker to pickle, loaded back as the
same address. That actor processes run it, and that a process without the
patch understands the address: ``tests/supervisors/test_thespian_patches_in_processes.py``."""

from __future__ import annotations

import pickle
import socket

import pytest
from thespian.actors import ActorAddress
from thespian.system.transport.IPBase import IPActorAddress, TCPv4ActorAddress

from supervisors import _speed as T
from supervisors import _tcpaddr as A

pytestmark = pytest.mark.timeout(60)


def _address(port: int = 40123) -> ActorAddress:
    return ActorAddress(TCPv4ActorAddress("127.0.0.1", port))


def test_the_address_patch_fits_the_installed_thespian_and_is_applied() -> None:
    # A new Thespian: compare IPActorAddress.__getstate__ with
    # supervisors/_tcpaddr.py, then update ADDRESS_PATCH_FITS.
    assert T.address_patch_fingerprint() == T.ADDRESS_PATCH_FITS
    assert T.install_address_patch() is True
    assert IPActorAddress.__getstate__ is A.address_state
    assert IPActorAddress.__setstate__ is A.address_restore


def test_a_pickled_address_holds_integers_and_loads_as_the_same_address() -> None:
    address = _address()
    str(address)  # caches the text, which is never pickled
    state = address.addressDetails.__getstate__()
    assert "_str_form" not in state
    assert [type(state[k]) for k in ("af", "socktype", "proto")] == [int, int, int]
    loaded = pickle.loads(pickle.dumps(address, 3))
    details = loaded.addressDetails
    assert details.af is socket.AF_INET and details.socktype is socket.SOCK_STREAM
    assert loaded == address and hash(details) == hash(address.addressDetails)
    assert str(loaded) == str(address)
    assert details.__dict__.keys() - {"_str_form"} == state.keys()


def test_an_address_pickled_by_thespian_itself_loads_the_same() -> None:
    address = _address()
    plain = pickle.dumps({**address.addressDetails.__dict__})  # Thespian's state: enums
    details = TCPv4ActorAddress.__new__(TCPv4ActorAddress)
    details.__setstate__(pickle.loads(plain))
    assert details.af is socket.AF_INET and details == address.addressDetails


def test_the_pickle_is_smaller_than_thespians() -> None:
    address = _address()
    plain = pickle.dumps((TCPv4ActorAddress, address.addressDetails.__dict__), 3)
    assert len(pickle.dumps(address, 3)) < len(plain)
