package xdssansio.interop.grpcjava;

import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;

/**
 * One grpc-java xDS client for grpc_hook/hook.py (`--peer java`), child.py's protocol:
 * reads `ready`, `watch TYPE_URL NAME`, `unwatch TYPE_URL NAME` on stdin and answers `ok`
 * to each. GRPC_XDS_BOOTSTRAP is set by the hook; the XdsClient is one per process.
 */
public final class Child {
  private Child() {}

  public static void main(String[] args) throws IOException {
    Map<String, ManagedChannel> channels = new HashMap<>();
    BufferedReader in =
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    String line;
    while ((line = in.readLine()) != null) {
      String[] words = line.strip().split("\\s+");
      String name = words[words.length - 1];
      if (words[0].equals("watch")) {
        // Leaving idle starts the resolver: the xDS resolver watches the listener NAME.
        ManagedChannel channel =
            Grpc.newChannelBuilder("xds:///" + name, InsecureChannelCredentials.create()).build();
        channel.getState(true);
        ManagedChannel old = channels.put(name, channel);
        if (old != null) {
          old.shutdownNow();
        }
      } else if (words[0].equals("unwatch") && channels.containsKey(name)) {
        channels.remove(name).shutdownNow();
      }
      System.out.println("ok");
      System.out.flush();
    }
    channels.values().forEach(ManagedChannel::shutdownNow);
    System.exit(0);
  }
}
