package io.github.xdssansio;

import com.google.gson.JsonObject;
import java.util.Arrays;
import java.util.List;

/**
 * The xDS model of xds-sansio in-process: {@link #check} (the conformance checker over a
 * recorded conversation), {@link #replay} (a scenario on the model, with its diagram),
 * {@link ControlPlane} and {@link Stepper}. Every rule is the Rust model's; this package
 * moves JSON across JNI and throws {@link XdsSansioException}.
 */
public final class XdsSansio {
  private XdsSansio() {}

  /**
   * The checker's findings on a recording (JSON lines, docs/record-format.md): of {@code
   * side} ("client" or "server"), or of both when null.
   */
  public static List<Finding> check(String records, String side, String... descriptors) {
    JsonObject options = new JsonObject();
    if (side != null) {
      options.addProperty("side", side);
    }
    options.add("descriptors", Answers.GSON.toJsonTree(descriptors));
    return Arrays.asList(
        Answers.unwrap(Native.check(records, options.toString()), Finding[].class));
  }

  /** The checker's findings on both sides of a recording. */
  public static List<Finding> check(String records) {
    return check(records, null);
  }

  /** Replays a scenario (docs/scenario-language.md); a bad line throws with its number. */
  public static Report replay(String scenario, String name) {
    return Answers.unwrap(Native.replay(scenario, name), Report.class);
  }
}
