"""The xDS protocol model of xds-sansio, in-process.

- ``check(records)``: the conformance checker over a recorded conversation (JSON lines,
  the record format of docs/record-format.md) -> a list of ``Finding``.
- ``replay(scenario)``: a scenario (docs/scenario-language.md) replayed on the model ->
  a ``Report`` with its diagram.
- ``ControlPlane``: a management server on a loopback port serving the resources you give
  it and recording every stream; ``findings()`` is the checker on that recording.
- ``Stepper``: the model's client or server fed encoded messages one at a time.

Every rule is the Rust model's; this module only moves text across. Failures raise
``XdsSansioError`` with ``kind`` and, for a malformed record or scenario, ``line``.
"""
from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Protocol, Sequence, Union

from . import _native

__all__ = [
    "XdsSansioError",
    "Finding",
    "Line",
    "Report",
    "Message",
    "Event",
    "Step",
    "check",
    "replay",
    "ControlPlane",
    "Stepper",
    "type_url",
]


class XdsSansioError(Exception):
    """A failure on the native side: ``kind`` says what failed (``record``,
    ``scenario``, ``resources``, ``message``, ``usage``, ``io``, ``internal``), ``line``
    the 1-based line of the input when it has lines."""

    def __init__(self, kind: str, line: Optional[int], message: str) -> None:
        super().__init__(f"line {line}: {message}" if line else message)
        self.kind = kind
        self.line = line
        self.message = message


def _unwrap(answer: str) -> Any:
    value = json.loads(answer)
    if "error" in value:
        error = value["error"]
        raise XdsSansioError(error["kind"], error.get("line"), error["message"])
    return value["ok"]


@dataclass(frozen=True)
class Finding:
    """One broken rule: its id, the side that broke it, the recording's line, what
    was wrong, and the protocol passage the rule comes from."""

    rule: str
    side: str
    line: int
    detail: str
    passage: str


@dataclass(frozen=True)
class Line:
    """One line of a replayed scenario."""

    line: int
    source: str
    actual: Optional[str]
    ok: bool
    error: Optional[str]
    note: Optional[str]


@dataclass(frozen=True)
class Report:
    """A replayed scenario: its lines and the two-column diagram."""

    title: str
    passed: bool
    lines: List[Line]
    trailing: Optional[str]
    diagram: str


@dataclass(frozen=True)
class Message:
    """A message the model sends: encoded, and as text."""

    data: bytes
    text: str


@dataclass(frozen=True)
class Event:
    """An event of the model: its name (``Upserted``, ``Acked``, ...) and all of it."""

    kind: str
    detail: str


@dataclass(frozen=True)
class Step:
    """What the model sent and its events after one input."""

    messages: List[Message] = field(default_factory=list)
    events: List[Event] = field(default_factory=list)


def _findings(items: List[Dict[str, Any]]) -> List[Finding]:
    return [Finding(**item) for item in items]


def check(
    records: str,
    side: Optional[str] = None,
    variant: str = "sotw",
    descriptors: Sequence[str] = (),
) -> List[Finding]:
    """The checker's findings on a recorded conversation (JSON lines): of ``side``
    (``"client"`` or ``"server"``), or of both. ``descriptors`` are FileDescriptorSet
    files for recordings that write resources as canonical JSON."""
    options = {"side": side, "variant": variant, "descriptors": list(descriptors)}
    return _findings(_unwrap(_native.check(records, json.dumps(options))))


def replay(scenario: str, name: str = "scenario") -> Report:
    """Replays a scenario on the model; a line that does not parse raises with its
    number, a line that fails is in the report."""
    value = _unwrap(_native.replay(scenario, name))
    value["lines"] = [Line(**line) for line in value["lines"]]
    return Report(**value)


class ProtoMessage(Protocol):
    """A generated protobuf message (``google.protobuf.message.Message``)."""

    DESCRIPTOR: Any

    def SerializeToString(self) -> bytes: ...


Encoded = Union[bytes, ProtoMessage]
"""An encoded message, or a generated one (encoded with ``SerializeToString``)."""


def _bytes(data: Encoded) -> bytes:
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    return data.SerializeToString()


def type_url(message: ProtoMessage) -> str:
    """A generated message's type URL (``type.googleapis.com/`` and its full name)."""
    return "type.googleapis.com/" + str(message.DESCRIPTOR.full_name)


def _b64(data: Encoded) -> str:
    return base64.b64encode(_bytes(data)).decode()


class ControlPlane:
    """The model's management server (ADS and every per-type service, SotW and delta)
    on a loopback port, recording every stream. Use as a context manager, or ``stop()``.
    """

    def __init__(
        self,
        resources: Optional[str] = None,
        resources_path: Optional[str] = None,
        descriptors: Sequence[str] = (),
        listen: str = "127.0.0.1:0",
        faults: Optional[str] = None,
        seed: int = 0,
        scenario: Optional[str] = None,
    ) -> None:
        """``faults``: fault rules, one per line (``drop type=cds nth=1``,
        ``close after=3``, ...; docs/test-control-plane.md), deterministic from
        ``seed``. ``scenario``: a scenario whose server lines are played in time."""
        options = {
            "listen": listen,
            "resources": resources,
            "resources_path": resources_path,
            "descriptors": list(descriptors),
            "faults": faults,
            "seed": seed,
            "scenario": scenario,
        }
        plane, error = _native.start_control_plane(json.dumps(options))
        if plane is None:
            _unwrap(error)
            raise XdsSansioError("internal", None, "no control plane and no error")
        self._plane = plane
        self.port: int = _unwrap(plane.call("port", ""))

    def _call(self, method: str, **args: Any) -> Any:
        return _unwrap(self._plane.call(method, json.dumps(args)))

    @property
    def address(self) -> str:
        """``127.0.0.1:PORT``, for a bootstrap's ``server_uri``."""
        return f"127.0.0.1:{self.port}"

    def set(self, type_url: str, body: Encoded) -> None:
        """Adds or replaces a resource of ``type_url`` (named as its body says)."""
        self._call("set", type_url=type_url, body=_b64(body))

    def set_resource(self, message: ProtoMessage) -> None:
        """Adds or replaces a generated resource (a Cluster, a Listener, ...)."""
        self.set(type_url(message), message)

    def remove(self, type_url: str, name: str) -> None:
        """Removes a resource."""
        self._call("remove", type_url=type_url, name=name)

    def replace(self, resources: str) -> None:
        """Serves exactly ``{"resources": [Any, ...]}`` from now on."""
        self._call("replace", resources=resources)

    def end_streams(self) -> None:
        """Ends every open stream (clients reconnect and resume)."""
        self._call("end_streams")

    def stream_count(self) -> int:
        """How many streams are open."""
        return int(self._call("stream_count"))

    def recorded(self) -> int:
        """How many lines the recording holds."""
        return int(self._call("recorded"))

    def records(self) -> str:
        """The recording so far (JSON lines, the record format)."""
        return str(self._call("records"))

    def findings(self, side: Optional[str] = None) -> List[Finding]:
        """The checker's findings on the recording so far: the client's and the
        server's, or ``side``'s."""
        return _findings(self._call("findings", side=side))

    def stop(self) -> None:
        """Stops serving; reads still work."""
        self._call("stop")

    def __enter__(self) -> "ControlPlane":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _step(value: Dict[str, Any]) -> Step:
    return Step(
        messages=[Message(base64.b64decode(m["bytes"]), m["text"]) for m in value["messages"]],
        events=[Event(**e) for e in value["events"]],
    )


class Stepper:
    """The model's client (``role="client"``: feed it responses) or server
    (``role="server"``: feed it requests) on a virtual clock. Every input returns the
    ``Step`` that followed."""

    def __init__(
        self,
        role: str = "client",
        variant: str = "sotw",
        per_type: Optional[str] = None,
        node_id: Optional[str] = None,
    ) -> None:
        options = {"role": role, "variant": variant, "per_type": per_type, "node_id": node_id}
        stepper, error = _native.new_stepper(json.dumps(options))
        if stepper is None:
            _unwrap(error)
            raise XdsSansioError("internal", None, "no stepper and no error")
        self._stepper = stepper

    def _call(self, method: str, **args: Any) -> Step:
        return _step(_unwrap(self._stepper.call(method, json.dumps(args))))

    def connected(self) -> Step:
        """Client: the stream is up."""
        return self._call("connected")

    def disconnected(self) -> Step:
        """Client: the stream broke."""
        return self._call("disconnected")

    def subscribe(self, type_url: str, names: Sequence[str] = ()) -> Step:
        """Client: subscribe to names (none: the wildcard)."""
        return self._call("subscribe", type_url=type_url, names=list(names))

    def set(self, type_url: str, body: Encoded) -> Step:
        """Server: add or replace a resource in the store."""
        return self._call("set", type_url=type_url, body=_b64(body))

    def remove(self, type_url: str, name: str) -> Step:
        """Server: remove a resource from the store."""
        return self._call("remove", type_url=type_url, name=name)

    def handle(self, data: Encoded) -> Step:
        """The peer's message, encoded or generated (a ``DiscoveryResponse`` to a client, a
        ``DiscoveryRequest`` to a server, or their delta forms)."""
        return self._call("handle", bytes=_b64(data))

    def advance(self, millis: int) -> Step:
        """Moves the virtual clock forward and fires what is due."""
        return self._call("advance", millis=millis)
