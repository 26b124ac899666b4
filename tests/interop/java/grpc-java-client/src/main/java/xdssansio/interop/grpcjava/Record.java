package xdssansio.interop.grpcjava;

import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.BiPredicate;

/** ads_server's recording (`--record`), read again while the story runs. */
final class Record {
  final Path path;

  Record(Path path) {
    this.path = path;
  }

  /** The messages (lines with a direction), in order. */
  List<JsonObject> messages() throws IOException {
    List<JsonObject> out = new ArrayList<>();
    List<String> lines;
    try {
      lines = Files.readAllLines(path, StandardCharsets.UTF_8);
    } catch (NoSuchFileException e) {
      return out;
    }
    for (String raw : lines) {
      raw = raw.strip();
      if (raw.isEmpty()) {
        continue;
      }
      JsonObject line;
      try {
        line = JsonParser.parseString(raw).getAsJsonObject();
      } catch (RuntimeException e) {
        continue; // the last line, still being written
      }
      if (line.has("dir")) {
        out.add(line);
      }
    }
    return out;
  }

  static JsonObject message(JsonObject line) {
    return line.getAsJsonObject("message");
  }

  static String str(JsonObject object, String key) {
    return object.has(key) ? object.get(key).getAsString() : "";
  }

  static boolean fromClient(JsonObject line) {
    return str(line, "dir").equals("C->S");
  }

  static String stream(JsonObject line) {
    return line.get("stream").toString();
  }

  /** Waits until the client answered (ACK or NACK) the last response of every type. */
  void settled(Duration timeout) throws IOException, InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    Map<String, String> open = new HashMap<>();
    while (System.nanoTime() < deadline) {
      open.clear();
      for (JsonObject line : messages()) {
        JsonObject m = message(line);
        String key = stream(line) + " " + str(m, "typeUrl");
        if (!fromClient(line)) {
          open.put(key, str(m, "nonce"));
        } else if (open.containsKey(key) && open.get(key).equals(str(m, "responseNonce"))) {
          open.remove(key);
        }
      }
      if (open.isEmpty()) {
        return;
      }
      Thread.sleep(50);
    }
    throw new FlowFailure("responses left unanswered: " + open);
  }

  /** The index and line of the first message the predicate takes, waited for. */
  Map.Entry<Integer, JsonObject> await(
      String what, BiPredicate<Integer, JsonObject> predicate, Duration timeout)
      throws IOException, InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (System.nanoTime() < deadline) {
      List<JsonObject> messages = messages();
      for (int i = 0; i < messages.size(); i++) {
        if (predicate.test(i, messages.get(i))) {
          return Map.entry(i, messages.get(i));
        }
      }
      Thread.sleep(50);
    }
    throw new FlowFailure("timed out waiting in the record for: " + what);
  }
}
