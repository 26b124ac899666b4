package io.github.xdssansio;

import com.google.gson.Gson;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;

/** Reads the native library's answers: the value, or an {@link XdsSansioException}. */
final class Answers {
  static final Gson GSON = new Gson();

  private Answers() {}

  static JsonElement unwrap(String answer) {
    if (answer == null) {
      throw new XdsSansioException("internal", 0, "no answer from the native library");
    }
    JsonObject value = JsonParser.parseString(answer).getAsJsonObject();
    if (value.has("error")) {
      JsonObject error = value.getAsJsonObject("error");
      JsonElement line = error.get("line");
      throw new XdsSansioException(
          error.get("kind").getAsString(),
          line == null || line.isJsonNull() ? 0 : line.getAsInt(),
          error.get("message").getAsString());
    }
    return value.get("ok");
  }

  static <T> T unwrap(String answer, Class<T> type) {
    return GSON.fromJson(unwrap(answer), type);
  }
}
