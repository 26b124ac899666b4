// The node package against the real peer of its language: @grpc/grpc-js-xds resolving
// xds:///echo.test through the in-process control plane (resources as canonical JSON,
// read with the repository's Envoy descriptors), then the checker on what it did.
'use strict';

const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const grpc = require('@grpc/grpc-js');
const xds = require('@grpc/grpc-js-xds');
const protobuf = require('protobufjs');
const { ControlPlane, Stepper, XdsSansioError, check, replay } = require('..');

const CDS = 'type.googleapis.com/envoy.config.cluster.v3.Cluster';
const EDS = 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment';
const TARGET = 'echo.test';
const WAIT = 20000;
const data = path.join(__dirname, '..', '..', '..', 'examples', 'data');
const descriptors = path.join(data, 'envoy.desc');
// The Listener, RouteConfiguration, Cluster and ClusterLoadAssignment of the interop story.
const template = JSON.parse(fs.readFileSync(path.join(data, 'resources.json'), 'utf8')).resources;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const id = (x) => x;

// The four resources, the endpoints on `port`, the Cluster STATIC (NACKed) when invalid.
function resources(port, { valid = true } = {}) {
  const copy = JSON.parse(JSON.stringify(template));
  for (const r of copy) {
    if (r['@type'] === EDS) r.endpoints[0].lbEndpoints[0].endpoint.address.socketAddress.portValue = port;
    if (r['@type'] === CDS && !valid) r.type = 'STATIC';
  }
  return { resources: copy };
}

function startBackend(name) {
  return new Promise((resolve, reject) => {
    const server = new grpc.Server();
    const method = { path: '/interop.Echo/Echo', requestStream: false, responseStream: false,
      requestSerialize: id, requestDeserialize: id, responseSerialize: id, responseDeserialize: id };
    server.addService({ Echo: method }, { Echo: (call, cb) => cb(null, Buffer.from(name)) });
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, port) =>
      err ? reject(err) : resolve([server, port]));
  });
}

function call(client) {
  return new Promise((resolve) => {
    client.makeUnaryRequest('/interop.Echo/Echo', id, id, Buffer.from('hi'),
      { deadline: Date.now() + 2000 },
      (err, value) => resolve(err ? `error:${grpc.status[err.code]}` : value.toString()));
  });
}

async function waitFor(what, predicate) {
  const deadline = Date.now() + WAIT;
  while (Date.now() < deadline) {
    if (await predicate()) return;
    await sleep(100);
  }
  assert.fail(`timed out waiting for ${what}`);
}

const requests = (plane) => plane.records().trim().split('\n').map((l) => JSON.parse(l))
  .filter((l) => l.dir === 'C->S').map((l) => l.message);

test('grpc-js-xds through the control plane breaks no rule', async () => {
  const [[b1, port1], [b2, port2]] = await Promise.all([startBackend('B1'), startBackend('B2')]);
  const plane = new ControlPlane({ resources: JSON.stringify(resources(port1)), descriptors: [descriptors] });
  const workdir = fs.mkdtempSync(path.join(os.tmpdir(), 'xds-sansio-js-'));
  const bootstrap = path.join(workdir, 'bootstrap.json');
  fs.writeFileSync(bootstrap, JSON.stringify({
    xds_servers: [{ server_uri: plane.address, channel_creds: [{ type: 'insecure' }], server_features: ['xds_v3'] }],
    node: { id: 'xds-sansio-js-test', locality: { zone: 'z' } },
  }));
  process.env.GRPC_XDS_BOOTSTRAP = bootstrap;
  xds.register();
  const client = new grpc.Client(`xds:///${TARGET}`, grpc.credentials.createInsecure());
  try {
    await waitFor('an RPC to B1', async () => (await call(client)) === 'B1');
    plane.replace(resources(port2));
    await waitFor('an RPC to B2', async () => (await call(client)) === 'B2');
    plane.replace(resources(port2, { valid: false }));
    await waitFor('the NACK of the STATIC Cluster', () =>
      requests(plane).some((r) => r.typeUrl === CDS && 'errorDetail' in r));
    plane.replace(resources(port2));
    await waitFor('the ACK of the fixed Cluster', () => {
      const cds = requests(plane).filter((r) => r.typeUrl === CDS);
      return !('errorDetail' in cds[cds.length - 1]);
    });
    assert.strictEqual(await call(client), 'B2');
  } finally {
    client.close();
    b1.forceShutdown();
    b2.forceShutdown();
  }
  plane.stop();
  const types = new Set(requests(plane).map((r) => r.typeUrl));
  assert.strictEqual(types.size, 4, [...types].join(', '));
  const findings = plane.findings();
  assert.deepStrictEqual(findings, [], findings.map((f) => `${f.side} line ${f.line}: ${f.rule}: ${f.detail}`).join('\n'));

  // The same recording with an ACK naming a nonce never sent: the checker must find it.
  const lines = plane.records().trim().split('\n');
  const at = lines.findIndex((l) => {
    const entry = JSON.parse(l);
    return entry.dir === 'C->S' && entry.message.responseNonce;
  });
  const entry = JSON.parse(lines[at]);
  entry.message.responseNonce = 'never-sent';
  lines[at] = JSON.stringify(entry);
  const broken = check(lines.join('\n'), { side: 'client', descriptors: [descriptors] });
  assert.deepStrictEqual(broken.map((f) => [f.rule, f.line]), [['nonce-unknown', at + 1]]);
  assert.ok(broken[0].passage);
});

test('a malformed record throws naming its line', () => {
  const text = '{"record":"xds-sansio","version":1}\n{"dir":"C->S","message":{}}\n{oops\n';
  assert.throws(() => check(text), (e) => e instanceof XdsSansioError && e.kind === 'record' && e.line === 3);
});

test('replay draws the scenario and names a bad line', () => {
  const scenario = 'title: Simple ACK\nmodel: both\nvariant: sotw\n\nclient subscribe EDS foo\nserver set EDS foo:a\n' +
    'C->S (V=,R={foo},N=,T=EDS)\nS->C (V=X,R={foo:a},N=A,T=EDS)\nC->S (V=X,R={foo},N=A,T=EDS) [ack]\n';
  const report = replay(scenario, 'ack.xds');
  assert.ok(report.passed && report.diagram.includes('=> PASS'), report.diagram);
  assert.ok(!replay(scenario.replace('N=A,T=EDS) [ack]', 'N=B,T=EDS) [ack]')).passed);
  assert.throws(() => replay('model: both\n\nclient frobnicate EDS foo\n'),
    (e) => e instanceof XdsSansioError && e.kind === 'scenario' && e.line === 3);
});

test('the stepper answers as the model does', () => {
  const client = new Stepper({ nodeId: 'n' });
  const server = new Stepper({ role: 'server' });
  server.set(EDS, Buffer.from('\x0a\x03foo', 'latin1'));
  client.subscribe(EDS, ['foo']);
  const [first] = client.connected().messages;
  const [answer] = server.handle(first.bytes).messages;
  const step = client.handle(answer.bytes);
  assert.ok(step.events.some((e) => e.kind === 'Upserted'), JSON.stringify(step.events));
  assert.ok(server.handle(step.messages[0].bytes).events.some((e) => e.kind === 'Acked'));
  assert.throws(() => server.handle(Buffer.from([0xff, 0xff])), (e) => e.kind === 'message');
  assert.throws(() => new Stepper({ role: 'nobody' }), (e) => e instanceof XdsSansioError && e.kind === 'usage');
});

test('the stepper takes generated messages (protobufjs)', () => {
  // A protobufjs type of the discovery messages' fields the model reads and writes.
  const root = protobuf.Root.fromJSON({
    nested: {
      Any: { fields: { type_url: { type: 'string', id: 1 }, value: { type: 'bytes', id: 2 } } },
      DiscoveryRequest: {
        fields: {
          version_info: { type: 'string', id: 1 },
          // The node, kept opaque: a field the schema leaves out is lost on re-encoding.
          node: { type: 'bytes', id: 2 },
          resource_names: { rule: 'repeated', type: 'string', id: 3 },
          type_url: { type: 'string', id: 4 },
          response_nonce: { type: 'string', id: 5 },
        },
      },
      DiscoveryResponse: {
        fields: {
          version_info: { type: 'string', id: 1 },
          resources: { rule: 'repeated', type: 'Any', id: 2 },
          type_url: { type: 'string', id: 4 },
          nonce: { type: 'string', id: 5 },
        },
      },
    },
  });
  const DiscoveryRequest = root.lookupType('DiscoveryRequest');
  const DiscoveryResponse = root.lookupType('DiscoveryResponse');
  const client = new Stepper({ nodeId: 'n' });
  const server = new Stepper({ role: 'server' });
  server.set(EDS, Buffer.from('\n\u0003foo', 'latin1'));
  client.subscribe(EDS, ['foo']);
  const request = DiscoveryRequest.decode(client.connected().messages[0].bytes);
  assert.equal(request.type_url, EDS);
  const response = DiscoveryResponse.decode(server.handle(request).messages[0].bytes);
  assert.equal(response.resources.length, 1);
  assert.ok(client.handle(response).events.some((e) => e.kind === 'Upserted'));
  assert.throws(() => server.handle({ not: 'a message' }), (e) => e.kind === 'usage');
  client.close?.();
  server.close?.();
});
