package xdssansio.interop.grpcjava;

import com.google.gson.GsonBuilder;
import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/** report.json, the shape of xds_flow.py's: peer, steps, deviations, result (failure). */
final class Report {
  final JsonObject json = new JsonObject();
  private final JsonArray steps = new JsonArray();
  private final JsonArray deviations = new JsonArray();

  Report(String peer) {
    json.addProperty("peer", peer);
    json.add("steps", steps);
    json.add("deviations", deviations);
  }

  void step(JsonObject step) {
    steps.add(step);
  }

  static JsonObject step(String name, String key, JsonElement value) {
    JsonObject step = new JsonObject();
    step.addProperty("step", name);
    step.add(key, value);
    return step;
  }

  void deviation(String text) {
    deviations.add(text);
  }

  void finish(String result, String failure) {
    if (failure != null) {
      json.addProperty("failure", failure);
    }
    json.addProperty("result", result);
  }

  String text() {
    return new GsonBuilder().setPrettyPrinting().disableHtmlEscaping().create().toJson(json);
  }

  void write(Path file) throws IOException {
    Files.writeString(file, text() + "\n", StandardCharsets.UTF_8);
  }
}
