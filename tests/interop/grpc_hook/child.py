"""One grpcio (C-core) xDS client for hook.py: reads `ready`, `watch TYPE_URL NAME`, `unwatch TYPE_URL NAME`
on stdin, answers `ok` to each. GRPC_XDS_BOOTSTRAP is set by the hook."""
import sys

import grpc

channels = {}
for line in sys.stdin:
    words = line.split()
    # `watch TYPE_URL NAME`: the channel watches the listener NAME.
    if words[:1] == ["watch"]:
        channel = grpc.insecure_channel(f"xds:///{words[-1]}")
        # Leaving idle starts the resolver: the xDS resolver watches the listener.
        channel.subscribe(lambda state: None, try_to_connect=True)
        channels[words[-1]] = channel
    elif words[:1] == ["unwatch"] and words[-1] in channels:
        channels.pop(words[-1]).close()
    print("ok", flush=True)
for channel in channels.values():
    channel.close()
