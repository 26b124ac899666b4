// Interop: our ads_server example <-> @grpc/grpc-js-xds (npm).
//
// The same story as tests/interop/grpc_python: two echo backends, our ads_server (SotW
// ADS) on 127.0.0.1, a grpc-js channel to xds:///echo.test bootstrapped by
// GRPC_XDS_BOOTSTRAP. An RPC through xDS; an invalid Cluster NACKed and held while RPCs
// keep working; an endpoint change; Cluster removal and restore; Listener removal and
// restore; the server ends the stream and the client reconnects with its last versions.
// After each step the client's CSDS view (grpc-js-xds registers CSDS as an admin service)
// is compared with what the server sent. Restored resources differ from the deleted ones
// in one field, because grpc-js-xds ignores a restore whose content is identical to the
// deleted resource (grpc-node#3074). Every wait is bounded.
//
// usage: node xds_flow.js ADS_SERVER_BINARY DESCRIPTORS TEMPLATE_RESOURCES WORKDIR
'use strict';

const fs = require('fs');
const path = require('path');
const { spawn } = require('child_process');
const readline = require('readline');
const grpc = require('@grpc/grpc-js');
const xds = require('@grpc/grpc-js-xds');
const protoLoader = require('@grpc/proto-loader');

const LDS = 'type.googleapis.com/envoy.config.listener.v3.Listener';
const RDS = 'type.googleapis.com/envoy.config.route.v3.RouteConfiguration';
const CDS = 'type.googleapis.com/envoy.config.cluster.v3.Cluster';
const EDS = 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment';
const TARGET = 'echo.test';
const STEP_TIMEOUT = 20000;

const [binary, descriptors, template, workdir] = process.argv.slice(2);
const xdsVersion = require('@grpc/grpc-js-xds/package.json').version;
const report = { peer: `@grpc/grpc-js-xds ${xdsVersion}`, steps: [], deviations: [] };

const log = (...args) => console.log('[grpc-node]', ...args);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
function fail(message) {
  report.failure = message;
  throw new Error(message);
}
const short = (typeUrl) => typeUrl.split('.').pop();

// ------------------------------------------------------------------ resources

// The template (examples/data/resources.json) holds the Listener, RouteConfiguration,
// Cluster and ClusterLoadAssignment in canonical proto3 JSON; the story edits copies.
const base = JSON.parse(fs.readFileSync(template, 'utf8')).resources;
const pick = (type) => JSON.parse(JSON.stringify(base.find((r) => r['@type'] === type)));
const nameOf = (r) => (r['@type'] === EDS ? r.clusterName : r.name);

class Store {
  constructor(file) {
    this.file = file;
    this.resources = new Map(); // "type|name" -> resource JSON
    this.server = null;
  }
  set(resource) {
    this.resources.set(`${resource['@type']}|${nameOf(resource)}`, resource);
  }
  remove(type, name) {
    this.resources.delete(`${type}|${name}`);
  }
  write() {
    const tmp = `${this.file}.tmp`;
    fs.writeFileSync(tmp, JSON.stringify({ resources: [...this.resources.values()] }, null, 1));
    fs.renameSync(tmp, this.file);
    if (this.server) this.server.kill('SIGHUP');
  }
}

function endpoints(port) {
  const cla = pick(EDS);
  cla.endpoints[0].lbEndpoints[0].endpoint.address.socketAddress.portValue = port;
  return cla;
}

// `note` changes a field grpc-js-xds drops when it decodes a Cluster; `maxRequests` one it
// keeps (circuit_breakers), so only the latter makes a restored Cluster differ for it.
function cluster({ valid = true, note = '', maxRequests = 0 } = {}) {
  const c = pick(CDS);
  if (!valid) c.type = 'STATIC';
  if (note) c.altStatName = note;
  if (maxRequests) c.circuitBreakers = { thresholds: [{ priority: 'DEFAULT', maxRequests }] };
  return c;
}

// ------------------------------------------------------------------ the record

// The complete lines so far: the server appends while we read, so a last line without its
// newline is still being written and waits for the next read. A complete line that does not
// parse fails the run.
function readRecord(file) {
  if (!fs.existsSync(file)) return [];
  const text = fs.readFileSync(file, 'utf8');
  return text
    .slice(0, text.lastIndexOf('\n') + 1)
    .split('\n')
    .map((l, i) => [l.trim(), i + 1])
    .filter(([l]) => l)
    .map(([l, number]) => {
      try {
        return JSON.parse(l);
      } catch (e) {
        return fail(`${file} line ${number} is not JSON: ${e.message}`);
      }
    })
    .filter((l) => 'dir' in l);
}

async function waitRecord(file, what, predicate) {
  const deadline = Date.now() + STEP_TIMEOUT;
  while (Date.now() < deadline) {
    const lines = readRecord(file);
    for (let i = 0; i < lines.length; i++) if (predicate(lines[i], i)) return [i, lines[i]];
    await sleep(50);
  }
  fail(`timed out waiting in the record for: ${what}`);
}

// Waits until the client answered (ACK or NACK) the last response of every type.
async function settled(file) {
  const deadline = Date.now() + STEP_TIMEOUT;
  let open;
  while (Date.now() < deadline) {
    open = new Map();
    for (const l of readRecord(file)) {
      const key = `${l.stream}|${l.message.typeUrl}`;
      if (l.dir === 'S->C') open.set(key, l.message.nonce);
      else if (open.has(key) && open.get(key) === l.message.responseNonce) open.delete(key);
    }
    if (open.size === 0) return;
    await sleep(50);
  }
  fail(`responses left unanswered: ${JSON.stringify([...open])}`);
}

// Field 1 (the name) of an encoded resource.
function field1(buf) {
  let i = 0;
  const varint = () => {
    let v = 0;
    let shift = 0;
    for (;;) {
      const b = buf[i++];
      v += (b & 0x7f) * 2 ** shift;
      shift += 7;
      if (!(b & 0x80)) return v;
    }
  };
  while (i < buf.length) {
    const key = varint();
    const wire = key & 7;
    if (wire === 0) varint();
    else if (wire === 1) i += 8;
    else if (wire === 5) i += 4;
    else if (wire === 2) {
      const len = varint();
      if (key >>> 3 === 1) return buf.subarray(i, i + len).toString('utf8');
      i += len;
    } else return null;
  }
  return null;
}

// What the server last sent per "type|name": the encoded body, from the record.
function lastSent(file) {
  const sent = new Map();
  for (const l of readRecord(file)) {
    if (l.dir !== 'S->C') continue;
    const m = l.message;
    const type = m.typeUrl;
    const names = new Set();
    for (const any of m.resources || []) {
      const body = Buffer.from(any.value || '', 'base64');
      const name = field1(body);
      names.add(name);
      sent.set(`${type}|${name}`, body);
    }
    if (type === LDS || type === CDS) {
      // Full state: what is not in it is gone.
      for (const key of [...sent.keys()]) {
        if (key.startsWith(`${type}|`) && !names.has(key.slice(type.length + 1))) sent.delete(key);
      }
    }
  }
  return sent;
}

// ------------------------------------------------------------------ peers

function startBackend(name) {
  return new Promise((resolve, reject) => {
    const server = new grpc.Server();
    const id = (x) => x;
    server.addService(
      {
        Echo: {
          path: '/interop.Echo/Echo',
          requestStream: false,
          responseStream: false,
          requestSerialize: id,
          requestDeserialize: id,
          responseSerialize: id,
          responseDeserialize: id,
        },
      },
      { Echo: (call, cb) => cb(null, Buffer.from(name)) },
    );
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, port) =>
      err ? reject(err) : resolve([server, port]),
    );
  });
}

function call(client, timeout = 2000) {
  return new Promise((resolve) => {
    const id = (x) => x;
    client.makeUnaryRequest(
      '/interop.Echo/Echo',
      id,
      id,
      Buffer.from('hi'),
      { deadline: Date.now() + timeout },
      (err, value) => resolve(err ? `error:${grpc.status[err.code]}` : value.toString()),
    );
  });
}

async function waitCall(client, what, predicate) {
  const deadline = Date.now() + STEP_TIMEOUT;
  let result;
  while (Date.now() < deadline) {
    result = await call(client);
    if (predicate(result)) return result;
    await sleep(100);
  }
  fail(`timed out waiting for RPCs: ${what} (last result ${result})`);
}

function csdsClient(port) {
  const root = path.dirname(require.resolve('@grpc/grpc-js-xds/package.json'));
  const def = protoLoader.loadSync('envoy/service/status/v3/csds.proto', {
    keepCase: true,
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
    includeDirs: ['envoy-api', 'xds', 'protoc-gen-validate', 'googleapis'].map((d) =>
      path.join(root, 'deps', d),
    ),
  });
  const Csds = grpc.loadPackageDefinition(def).envoy.service.status.v3.ClientStatusDiscoveryService;
  return new Csds(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
}

function csds(stub) {
  return new Promise((resolve, reject) => {
    stub.FetchClientStatus({}, { deadline: Date.now() + 5000 }, (err, response) => {
      if (err) return reject(err);
      const view = new Map();
      if (process.env.CSDS_DEBUG) log('CSDS', JSON.stringify(response));
      for (const config of response.config) {
        for (const g of config.generic_xds_configs) {
          // grpc-js-xds lists the type without the type.googleapis.com/ prefix (csds.proto
          // allows "envoy.v3.Cluster"-like names; gRPC C-core sends full type URLs).
          const typeUrl = g.type_url.includes('/') ? g.type_url : `type.googleapis.com/${g.type_url}`;
          if (typeUrl !== g.type_url) report.csds_type_url_form = g.type_url;
          view.set(`${typeUrl}|${g.name}`, {
            status: g.client_status,
            version: g.version_info,
            body: g.xds_config ? Buffer.from(g.xds_config.value) : null,
            error: g.error_state ? g.error_state.details : '',
          });
        }
      }
      resolve(view);
    });
  });
}

// The CSDS view against what the server sent: every stored resource ACKED with the bytes
// the server sent last, except the keys of `expect` ("type|name" -> acceptable statuses).
async function compare(stub, store, recordFile, step, expect = {}) {
  const deadline = Date.now() + STEP_TIMEOUT;
  for (;;) {
    const view = await csds(stub);
    const sent = lastSent(recordFile);
    const problems = [];
    const keys = new Set([...store.resources.keys(), ...Object.keys(expect)]);
    for (const key of keys) {
      const want = expect[key] || ['ACKED'];
      const got = view.get(key);
      const status = got ? got.status : 'ABSENT';
      if (!want.includes(status)) problems.push(`${key}: ${status} (want ${want})`);
      else if (status === 'ACKED' && store.resources.has(key)) {
        if (!sent.has(key) || !got.body || !got.body.equals(sent.get(key))) {
          problems.push(`${key}: CSDS content differs from what the server sent last`);
        }
      }
    }
    if (problems.length === 0) {
      const summary = {};
      for (const [k, v] of view) summary[`${short(k.split('|')[0])}/${k.split('|')[1]}`] = v.status;
      report.steps.push({ step, csds: summary });
      log(`CSDS after ${step}:`, JSON.stringify(summary));
      return view;
    }
    if (Date.now() > deadline) {
      const shown = JSON.stringify([...view].map(([k, v]) => [k, v.status, v.version, v.error]));
      fail(`CSDS after ${step}: ${problems.join('; ')}; CSDS view: ${shown}`);
    }
    await sleep(100);
  }
}

// ------------------------------------------------------------------ the story

async function main() {
  fs.mkdirSync(workdir, { recursive: true });
  const resourcesFile = path.join(workdir, 'resources.json');
  const recordFile = path.join(workdir, 'record.jsonl');
  const [backend1, port1] = await startBackend('B1');
  const [backend2, port2] = await startBackend('B2');
  const store = new Store(resourcesFile);
  store.set(pick(LDS));
  store.set(pick(RDS));
  store.set(cluster());
  store.set(endpoints(port1));
  store.write();

  const server = spawn(
    binary,
    ['--listen', '127.0.0.1:0', '--resources', resourcesFile, '--descriptors', descriptors,
      '--record', recordFile, '--verbose'],
    { stdio: ['ignore', 'pipe', fs.openSync(path.join(workdir, 'ads_server.log'), 'w')] },
  );
  const cleanup = [() => server.kill('SIGTERM'), () => backend1.forceShutdown(),
    () => backend2.forceShutdown()];
  try {
    const first = await Promise.race([
      new Promise((resolve) => readline.createInterface({ input: server.stdout }).once('line', resolve)),
      sleep(STEP_TIMEOUT).then(() => ''),
    ]);
    if (!first.startsWith('listening on ')) fail(`ads_server did not start: ${first}`);
    const address = first.split(' ').pop();
    log('ads_server at', address);
    store.server = server;
    const bootstrap = path.join(workdir, 'bootstrap.json');
    fs.writeFileSync(bootstrap, JSON.stringify({
      xds_servers: [{ server_uri: address, channel_creds: [{ type: 'insecure' }], server_features: ['xds_v3'] }],
      node: { id: 'grpc-node-interop', cluster: 'interop', locality: { zone: 'z' } },
    }));
    process.env.GRPC_XDS_BOOTSTRAP = bootstrap;
    xds.register();

    const admin = new grpc.Server();
    grpc.addAdminServicesToServer(admin);
    const adminPort = await new Promise((resolve, reject) =>
      admin.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
    );
    cleanup.push(() => admin.forceShutdown());
    const stub = csdsClient(adminPort);
    const client = new grpc.Client(`xds:///${TARGET}`, grpc.credentials.createInsecure());
    cleanup.push(() => client.close());

    // 1. An RPC through xDS succeeds.
    await waitCall(client, 'first RPC through xDS', (r) => r === 'B1');
    await compare(stub, store, recordFile, 'first fetch');
    log('1. RPC through xDS: ok');

    // 2. An invalid Cluster is NACKed with error_detail; the server holds it.
    store.set(cluster({ valid: false }));
    store.write();
    const [nackAt, nack] = await waitRecord(recordFile, 'a CDS NACK', (l) =>
      l.dir === 'C->S' && l.message.typeUrl === CDS && 'errorDetail' in l.message);
    log('2. NACK:', JSON.stringify(nack.message.errorDetail));
    if (!nack.message.errorDetail.message) report.deviations.push('NACK error_detail has no message');
    await sleep(2000);
    const resent = readRecord(recordFile).filter((l, i) => i > nackAt && l.dir === 'S->C' && l.message.typeUrl === CDS);
    if (resent.length) fail(`the server resent CDS after the NACK: ${JSON.stringify(resent)}`);
    if ((await call(client)) !== 'B1') fail('RPCs stopped working after the NACK');
    const view = await compare(stub, store, recordFile, 'NACK', { [`${CDS}|cluster-1`]: ['NACKED'] });
    if (!view.get(`${CDS}|cluster-1`).error) report.deviations.push('CSDS shows no error_state details for the NACKed cluster');
    report.steps.push({ step: 'NACK', error_detail: nack.message.errorDetail, resent: false });

    // 3. Fix the cluster (back to the last good content); an endpoint change takes effect.
    store.set(cluster());
    store.write();
    const [fixAt, fix] = await waitRecord(recordFile, 'the fixed cluster', (l, i) =>
      i > nackAt && l.dir === 'S->C' && l.message.typeUrl === CDS);
    await waitRecord(recordFile, 'the ACK of the fixed cluster', (l, i) =>
      i > fixAt && l.dir === 'C->S' && l.message.typeUrl === CDS && !l.message.errorDetail
      && l.message.responseNonce === fix.message.nonce);
    // grpc-js-xds skips a resource equal to its cached one before it resets the NACKED
    // status (xds-client.js, resourcesEqual), so CSDS may say NACKED after the ACK.
    const fixedView = await compare(stub, store, recordFile, 'cluster fixed',
      { [`${CDS}|cluster-1`]: ['ACKED', 'NACKED'] });
    let stuck = fixedView.get(`${CDS}|cluster-1`).status === 'NACKED';
    if (stuck) {
      report.deviations.push('CSDS still shows the Cluster NACKED after the client ACKed a fix equal to the last good '
        + 'Cluster (resourcesEqual short-cut skips the status reset; same root as grpc-node#3074)');
    }
    store.set(endpoints(port2));
    store.write();
    await waitCall(client, 'endpoint change to B2', (r) => r === 'B2');
    await compare(stub, store, recordFile, 'endpoint change',
      stuck ? { [`${CDS}|cluster-1`]: ['NACKED'] } : {});
    log('3. endpoint change: ok');

    // 4. Cluster removal and restore (restored with a changed field: grpc-node#3074).
    store.remove(CDS, 'cluster-1');
    store.write();
    await waitRecord(recordFile, 'a CDS response without cluster-1', (l) =>
      l.dir === 'S->C' && l.message.typeUrl === CDS && !(l.message.resources || []).length);
    await compare(stub, store, recordFile, 'cluster removal', {
      [`${CDS}|cluster-1`]: ['DOES_NOT_EXIST', 'ABSENT'],
      [`${EDS}|cluster-1`]: ['ACKED', 'ABSENT'],
    });
    await sleep(1000);
    let during = await call(client);
    report.steps.push({ step: 'cluster removal', rpc: during });
    if (during === 'B2') {
      report.deviations.push('after the Cluster is removed RPCs still reach the old endpoints (deletion ignored)');
    }
    // grpc-node#3074: a restore equal (as decoded) to the deleted Cluster is ignored.
    store.set(cluster({ note: 'restored' }));
    store.write();
    await sleep(3000);
    const identical = await call(client);
    report.steps.push({ step: 'cluster restore, only a dropped field changed', rpc: identical });
    if (identical !== 'B2') {
      report.deviations.push('grpc-node#3074: a Cluster restored with content equal (as decoded) to the deleted one '
        + `is ignored: RPCs still fail 3 s after it was ACKed (${identical})`);
    }
    store.set(cluster({ note: 'restored', maxRequests: 1000 }));
    store.write();
    await waitCall(client, 'RPCs after the cluster is restored', (r) => r === 'B2');
    await compare(stub, store, recordFile, 'cluster restore');
    log('4. cluster removal/restore: ok (RPC during removal:', during, ')');

    // 5. Listener removal and restore (changed field, grpc-node#3074).
    store.remove(LDS, TARGET);
    store.write();
    await waitRecord(recordFile, 'an LDS response without the listener', (l) =>
      l.dir === 'S->C' && l.message.typeUrl === LDS && !(l.message.resources || []).length);
    await compare(stub, store, recordFile, 'listener removal', {
      [`${LDS}|${TARGET}`]: ['DOES_NOT_EXIST', 'ABSENT'],
      [`${RDS}|route-1`]: ['ACKED', 'ABSENT'],
      [`${CDS}|cluster-1`]: ['ACKED', 'ABSENT'],
      [`${EDS}|cluster-1`]: ['ACKED', 'ABSENT'],
    });
    await sleep(1000);
    during = await call(client);
    report.steps.push({ step: 'listener removal', rpc: during });
    if (during === 'B2') report.deviations.push('after the Listener is removed RPCs still work (deletion ignored)');
    const restored = pick(LDS);
    restored.statPrefix = 'restored';
    store.set(restored);
    store.write();
    await waitCall(client, 'RPCs after the listener is restored', (r) => r === 'B2');
    await compare(stub, store, recordFile, 'listener restore');
    log('5. listener removal/restore: ok (RPC during removal:', during, ')');

    // 6. The server ends the stream; the client reconnects with its last versions.
    await settled(recordFile);
    const last = {};
    for (const l of readRecord(recordFile)) {
      const m = l.message;
      if (l.dir === 'C->S' && !m.errorDetail && m.versionInfo) last[m.typeUrl] = m.versionInfo;
    }
    const streams = new Set(readRecord(recordFile).map((l) => l.stream));
    server.kill('SIGUSR1');
    await waitRecord(recordFile, 'requests on a new stream', (l) => !streams.has(l.stream) && l.dir === 'C->S');
    await sleep(1000);
    const firsts = {};
    for (const l of readRecord(recordFile)) {
      if (!streams.has(l.stream) && l.dir === 'C->S' && !(l.message.typeUrl in firsts)) {
        firsts[l.message.typeUrl] = l.message.versionInfo || '';
      }
    }
    report.steps.push({ step: 'reconnect', held: last, first_requests: firsts });
    for (const [type, version] of Object.entries(last)) {
      if (firsts[type] !== version) {
        report.deviations.push(`after reconnect the first ${short(type)} request carries version ${JSON.stringify(firsts[type])}, not the last ACKed ${JSON.stringify(version)}`);
      }
    }
    if ((await waitCall(client, 'RPCs across the reconnect', (r) => r === 'B2')) !== 'B2') fail('RPCs broke across the reconnect');
    await compare(stub, store, recordFile, 'reconnect');
    log('6. reconnect:', JSON.stringify(firsts));
  } finally {
    for (const c of cleanup) {
      try { c(); } catch (e) { /* already gone */ }
    }
  }
}

main()
  .then(() => { report.result = 'passed'; })
  .catch((e) => { report.result = `FAILED: ${e.message}`; process.exitCode = 1; })
  .finally(() => {
    fs.writeFileSync(path.join(workdir, 'report.json'), JSON.stringify(report, null, 1));
    log('report:', JSON.stringify(report, null, 1));
    // grpc-js keeps timers alive; the story is over.
    setTimeout(() => process.exit(), 200);
  });
