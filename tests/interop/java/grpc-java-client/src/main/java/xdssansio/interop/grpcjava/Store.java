package xdssansio.interop.grpcjava;

import com.google.protobuf.Any;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.Message;
import com.google.protobuf.util.JsonFormat;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** The resources file ads_server serves; every write is atomic, then SIGHUP. */
final class Store {
  final Map<Key, Message> resources = new LinkedHashMap<>();
  private final Path path;
  private Process server;

  Store(Path path) {
    this.path = path;
  }

  void serveTo(Process server) {
    this.server = server;
  }

  void set(Message message) {
    resources.put(new Key(Resources.typeUrl(message), Resources.name(message)), message);
  }

  void remove(String typeUrl, String name) {
    resources.remove(new Key(typeUrl, name));
  }

  void write() throws IOException, InterruptedException {
    JsonFormat.Printer printer = JsonFormat.printer().usingTypeRegistry(Resources.TYPES);
    List<String> items = new ArrayList<>();
    for (Message message : resources.values()) {
      items.add(printer.print(Any.pack(message)));
    }
    Path tmp = path.resolveSibling(path.getFileName() + ".tmp");
    Files.writeString(
        tmp, "{\"resources\": [\n" + String.join(",\n", items) + "\n]}\n", StandardCharsets.UTF_8);
    Files.move(tmp, path, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
    if (server != null) {
      Signals.send(server, "HUP");
    }
  }

  static Message parseLike(Message like, byte[] body) throws InvalidProtocolBufferException {
    return like.getParserForType().parseFrom(body);
  }
}
