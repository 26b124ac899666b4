// The xDS model of xds-sansio in-process for node: the conformance checker over a recorded
// conversation, scenario replay, a scripted control plane on a loopback port, and a model
// stepper. Every rule is the Rust model's (bindings/api); this module moves JSON across
// the napi-rs addon and throws XdsSansioError (kind, line) on bad input.
'use strict';

const native = require('./xds-sansio.node');

/** A failure on the native side: `kind` says what failed, `line` the input's line. */
class XdsSansioError extends Error {
  constructor(kind, line, message) {
    super(line ? `line ${line}: ${message}` : message);
    this.name = 'XdsSansioError';
    this.kind = kind;
    this.line = line ?? null;
    this.detail = message;
  }
}

function unwrap(answer) {
  const value = JSON.parse(answer);
  if (value.error) {
    throw new XdsSansioError(value.error.kind, value.error.line, value.error.message);
  }
  return value.ok;
}

// A constructor that failed threw an Error whose message is the error answer.
function construct(make) {
  try {
    return make();
  } catch (e) {
    let answer;
    try {
      answer = JSON.parse(e.message);
    } catch {
      throw e;
    }
    unwrap(JSON.stringify(answer));
    throw e;
  }
}

const b64 = (bytes) => Buffer.from(bytes).toString('base64');

/** The checker's findings on a recording (JSON lines): of `side`, or of both. */
function check(records, { side = null, variant = 'sotw', descriptors = [] } = {}) {
  return unwrap(native.check(records, JSON.stringify({ side, variant, descriptors })));
}

/** A scenario replayed on the model: `{title, passed, lines, trailing, diagram}`. */
function replay(scenario, name = 'scenario') {
  return unwrap(native.replay(scenario, name));
}

/**
 * The model's management server (ADS and every per-type service, SotW and delta) on a
 * loopback port, recording every stream; `findings()` is the checker on that recording.
 */
class ControlPlane {
  constructor({
    resources = null,
    resourcesPath = null,
    descriptors = [],
    listen = '127.0.0.1:0',
    faults = null,
    seed = 0,
    scenario = null,
  } = {}) {
    const options = { listen, resources, resources_path: resourcesPath, descriptors, faults, seed, scenario };
    this._plane = construct(() => native.startControlPlane(JSON.stringify(options)));
    this.port = this._call('port');
    this.address = `127.0.0.1:${this.port}`;
  }
  _call(method, args = {}) {
    return unwrap(this._plane.call(method, JSON.stringify(args)));
  }
  /** Adds or replaces an encoded resource (named as its body says). */
  set(typeUrl, body) {
    this._call('set', { type_url: typeUrl, body: b64(body) });
  }
  /** Removes a resource. */
  remove(typeUrl, name) {
    this._call('remove', { type_url: typeUrl, name });
  }
  /** Serves exactly `{"resources": [Any, ...]}` (text or an object) from now on. */
  replace(resources) {
    const text = typeof resources === 'string' ? resources : JSON.stringify(resources);
    this._call('replace', { resources: text });
  }
  /** Ends every open stream (clients reconnect and resume). */
  endStreams() {
    this._call('end_streams');
  }
  /** How many streams are open. */
  streamCount() {
    return this._call('stream_count');
  }
  /** The recording so far (JSON lines, the record format). */
  records() {
    return this._call('records');
  }
  /** The checker's findings so far: the client's and the server's, or `side`'s. */
  findings(side = null) {
    return this._call('findings', side ? { side } : {});
  }
  /** Stops serving; reads still work. */
  stop() {
    this._call('stop');
  }
}

function step(value) {
  return {
    messages: value.messages.map((m) => ({ bytes: Buffer.from(m.bytes, 'base64'), text: m.text })),
    events: value.events,
  };
}

/**
 * The model's client (`role: 'client'`, feed it responses) or server (`role: 'server'`,
 * feed it requests) on a virtual clock; every input returns the step that followed.
 */
class Stepper {
  constructor({ role = 'client', variant = 'sotw', perType = null, nodeId = null } = {}) {
    const options = { role, variant, per_type: perType, node_id: nodeId };
    this._stepper = construct(() => native.newStepper(JSON.stringify(options)));
  }
  _call(method, args = {}) {
    return step(unwrap(this._stepper.call(method, JSON.stringify(args))));
  }
  connected() {
    return this._call('connected');
  }
  disconnected() {
    return this._call('disconnected');
  }
  subscribe(typeUrl, names = []) {
    return this._call('subscribe', { type_url: typeUrl, names });
  }
  set(typeUrl, body) {
    return this._call('set', { type_url: typeUrl, body: b64(body) });
  }
  remove(typeUrl, name) {
    return this._call('remove', { type_url: typeUrl, name });
  }
  /** The peer's message: its bytes, or a generated message (google-protobuf or protobufjs). */
  handle(message) {
    return this._call('handle', { bytes: b64(encoded(message)) });
  }
  advance(millis) {
    return this._call('advance', { millis });
  }
}

/** A message's bytes: bytes as they are, a google-protobuf message by `serializeBinary`, a
 * protobufjs message by its type's `encode`. */
function encoded(message) {
  if (message instanceof Uint8Array) {
    return message;
  }
  if (message && typeof message.serializeBinary === 'function') {
    return message.serializeBinary();
  }
  if (message && message.$type && typeof message.$type.encode === 'function') {
    return message.$type.encode(message).finish();
  }
  throw new XdsSansioError('usage', null, 'handle takes bytes, a google-protobuf message or a protobufjs message');
}

module.exports = { XdsSansioError, check, replay, ControlPlane, Stepper };
