package xdssansio.interop.controlplane;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import com.google.protobuf.Message;
import io.envoyproxy.controlplane.cache.v3.SimpleCache;
import io.envoyproxy.controlplane.server.V3DiscoveryServer;
import io.grpc.Server;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.LinkedHashSet;
import java.util.Set;
import java.util.concurrent.TimeUnit;

/**
 * `xds-sansio conform server`'s hook for java-control-plane (docs/conform.md, "The hook";
 * the semantics of rust_peers' conform_server_hook): a control socket in front of a
 * V3DiscoveryServer over a SimpleCache, the way an application of java-control-plane
 * serves.
 *
 * <ul>
 *   <li>`start`: a fresh server on --listen (the previous one is shut down) with an empty
 *       cache, serving ADS and every per-type service it has (CDS, EDS, LDS, RDS, SDS), SotW
 *       and delta.
 *   <li>`publish`: the operations change the hook's store (type -> name -> body), and the
 *       whole store becomes one new Snapshot of node group `client`: build a snapshot,
 *       setSnapshot. Every node is in that group (`--node-group one`, the default: the
 *       `node -> GROUP` of java-control-plane's own example server and tests), or each
 *       request's node id is its group (`--node-group node-id`: conform's requests name
 *       node `client`).
 *   <li>A per-resource version (`a@1`) is the resource's VersionedResource version (else
 *       java-control-plane's hash); TTLs and aliases have no place in its snapshots: they
 *       are answered with the reason. It stores typed resources: a body that does not
 *       decode as its type's message is answered with the reason (give real bodies with
 *       --bodies).
 * </ul>
 *
 * <p>usage: ConformServerHook --control HOST:PORT --listen HOST:PORT [--node-group one|node-id]
 */
public final class ConformServerHook {
  private static final String NODE_GROUP = "client";

  private final InetSocketAddress listen;
  private final boolean byNodeId;
  private HookStore store = new HookStore();
  private SimpleCache<String> cache;
  private Server server;

  private ConformServerHook(InetSocketAddress listen, boolean byNodeId) {
    this.listen = listen;
    this.byNodeId = byNodeId;
  }

  private static String text(JsonObject object, String key) {
    JsonElement value = object.get(key);
    return value == null || value.isJsonNull() ? "" : value.getAsString();
  }

  void handle(JsonObject event) throws HookException {
    String hook = text(event, "hook");
    switch (hook) {
      case "start" -> {
        stop();
        store = new HookStore();
        serve();
      }
      case "publish" -> publish(event);
      case "stop" -> stop();
      default -> throw new HookException("this peer does not do \"" + hook + "\"");
    }
  }

  private void serve() throws HookException {
    cache = new SimpleCache<>(byNodeId ? node -> node.getId() : node -> NODE_GROUP);
    V3DiscoveryServer discovery = new V3DiscoveryServer(cache);
    try {
      server =
          NettyServerBuilder.forAddress(listen)
              .addService(discovery.getAggregatedDiscoveryServiceImpl())
              .addService(discovery.getClusterDiscoveryServiceImpl())
              .addService(discovery.getEndpointDiscoveryServiceImpl())
              .addService(discovery.getListenerDiscoveryServiceImpl())
              .addService(discovery.getRouteDiscoveryServiceImpl())
              .addService(discovery.getSecretDiscoveryServiceImpl())
              .build()
              .start();
    } catch (IOException e) {
      throw new HookException("the server did not listen on " + listen + ": " + e);
    }
  }

  private void stop() {
    if (server != null) {
      server.shutdownNow();
      try {
        server.awaitTermination(3, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      server = null;
      cache = null;
    }
  }

  private void publish(JsonObject event) throws HookException {
    if (cache == null) {
      throw new HookException("no scenario started");
    }
    JsonElement ops = event.get("ops");
    if (ops == null || !ops.isJsonArray()) {
      throw new HookException("publish without ops");
    }
    Set<String> touched = new LinkedHashSet<>();
    for (JsonElement element : (JsonArray) ops) {
      JsonObject op = element.getAsJsonObject();
      String typeUrl = text(op, "type_url");
      String name = text(op, "name");
      switch (text(op, "op")) {
        case "set" -> {
          if (op.has("ttl_ms") && !op.get("ttl_ms").isJsonNull()) {
            throw new HookException("this peer's snapshots have no TTLs");
          }
          if (op.has("aliases") && op.get("aliases").isJsonArray()
              && !op.getAsJsonArray("aliases").isEmpty()) {
            throw new HookException("this peer's snapshots have no aliases");
          }
          byte[] body;
          try {
            body = Base64.getDecoder().decode(text(op, "body"));
          } catch (IllegalArgumentException e) {
            throw new HookException("body: " + e.getMessage());
          }
          Message message = HookStore.decode(typeUrl, name, body);
          store.set(typeUrl, name, message, text(op, "version"));
        }
        case "remove" -> store.remove(typeUrl, name);
        case "publish" -> { }
        default -> throw new HookException("unknown op \"" + text(op, "op") + "\"");
      }
      touched.add(typeUrl);
    }
    store.advance(touched);
    cache.setSnapshot(NODE_GROUP, store.snapshot());
  }

  private static InetSocketAddress address(String hostPort) throws IOException {
    int colon = hostPort.lastIndexOf(':');
    return new InetSocketAddress(
        InetAddress.getByName(hostPort.substring(0, colon)),
        Integer.parseInt(hostPort.substring(colon + 1)));
  }

  private static String arg(String[] args, String name) {
    for (int i = 0; i + 1 < args.length; i++) {
      if (args[i].equals(name)) {
        return args[i + 1];
      }
    }
    return null;
  }

  public static void main(String[] args) throws IOException {
    String control = arg(args, "--control");
    String listen = arg(args, "--listen");
    if (control == null || listen == null) {
      System.err.println("usage: ConformServerHook --control HOST:PORT --listen HOST:PORT"
          + " [--node-group one|node-id]");
      System.exit(2);
    }
    String groups = arg(args, "--node-group");
    if (groups != null && !groups.equals("one") && !groups.equals("node-id")) {
      System.err.println("--node-group one|node-id");
      System.exit(2);
    }
    ConformServerHook hook = new ConformServerHook(address(listen), "node-id".equals(groups));
    InetSocketAddress controlAddress = address(control);
    try (ServerSocket socket = new ServerSocket()) {
      socket.setReuseAddress(true);
      socket.bind(controlAddress);
      System.out.println("hook listening on " + control + ", the server on " + listen);
      System.out.flush();
      while (true) {
        try (Socket connection = socket.accept()) {
          hook.serveControl(connection);
        }
        hook.stop();
      }
    }
  }

  private void serveControl(Socket connection) throws IOException {
    BufferedReader in =
        new BufferedReader(
            new InputStreamReader(connection.getInputStream(), StandardCharsets.UTF_8));
    Writer out = new OutputStreamWriter(connection.getOutputStream(), StandardCharsets.UTF_8);
    String line;
    while ((line = in.readLine()) != null) {
      if (line.isBlank()) {
        continue;
      }
      String answer;
      String hookName = "";
      try {
        JsonObject event = JsonParser.parseString(line).getAsJsonObject();
        hookName = text(event, "hook");
        handle(event);
        answer = "ok";
      } catch (HookException e) {
        answer = e.getMessage().replace('\n', ' ');
      } catch (RuntimeException e) {
        answer = "hook error: " + e.toString().replace('\n', ' ');
      }
      System.out.println(hookName + " -> " + answer);
      System.out.flush();
      out.write(answer + "\n");
      out.flush();
    }
  }
}
