#!/usr/bin/env bash
# Makes sure etcd (Debian's etcd-server, 3.4 or later) is installed, and prints the path of
# its binary. The etcd replica tests (xds-sansio-tonic/tests/etcd_replicas.rs) call it and
# fail loudly when it fails; scripts/test.sh calls it first.
set -euo pipefail
if ! command -v etcd >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then SUDO=(); else SUDO=(sudo); fi
  echo "installing etcd-server (apt-get)" >&2
  "${SUDO[@]}" apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq etcd-server >&2
fi
command -v etcd
