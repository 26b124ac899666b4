// One @grpc/grpc-js-xds client for hook.py: reads `ready`, `watch TYPE_URL NAME`, `unwatch TYPE_URL NAME`
// on stdin, answers `ok` to each. GRPC_XDS_BOOTSTRAP is set by the hook; NODE_PATH finds
// the packages (tests/interop/run.sh installs them).
const readline = require('readline');
const grpc = require('@grpc/grpc-js');
const xds = require('@grpc/grpc-js-xds');

xds.register();
const clients = new Map();
readline.createInterface({ input: process.stdin }).on('line', (line) => {
  const words = line.trim().split(/\s+/);
  const verb = words[0];
  const name = words[words.length - 1]; // watch TYPE_URL NAME
  if (verb === 'watch') {
    const client = new grpc.Client(`xds:///${name}`, grpc.credentials.createInsecure());
    // Leaving idle starts the resolver: the xDS resolver watches the listener.
    client.getChannel().getConnectivityState(true);
    clients.set(name, client);
  } else if (verb === 'unwatch' && clients.has(name)) {
    clients.get(name).close();
    clients.delete(name);
  }
  process.stdout.write('ok\n');
}).on('close', () => {
  for (const client of clients.values()) client.close();
  process.exit(0);
});
