package io.github.xdssansio;

import com.google.gson.JsonObject;
import java.util.Arrays;
import java.util.Base64;
import java.util.List;

/**
 * The model's management server (ADS and every per-type service, SotW and delta) on a
 * loopback port, recording every stream; {@link #findings} is the checker on that
 * recording. Thread-safe; close it (try-with-resources) to stop and free it.
 */
public final class ControlPlane implements AutoCloseable {
  private long handle;
  private final int port;

  private ControlPlane(long handle) {
    this.handle = handle;
    this.port = call("port", new JsonObject()).getAsInt();
  }

  /**
   * Starts serving {@code resources} ({@code {"resources": [Any, ...]}}, canonical JSON, or
   * null for none), reading canonical JSON with the FileDescriptorSet files {@code
   * descriptors}.
   */
  public static ControlPlane start(String resources, String... descriptors) {
    JsonObject options = new JsonObject();
    if (resources != null) {
      options.addProperty("resources", resources);
    }
    options.add("descriptors", Answers.GSON.toJsonTree(descriptors));
    return new ControlPlane(Answers.unwrap(Native.startControlPlane(options.toString())).getAsLong());
  }

  /**
   * Starts serving the resources of a file or a directory of files (each a
   * DiscoveryResponse in .json, .yaml or .pb), canonical JSON read with {@code descriptors}.
   */
  public static ControlPlane startFromPath(String path, String... descriptors) {
    JsonObject options = new JsonObject();
    options.addProperty("resources_path", path);
    options.add("descriptors", Answers.GSON.toJsonTree(descriptors));
    return new ControlPlane(Answers.unwrap(Native.startControlPlane(options.toString())).getAsLong());
  }

  /**
   * Starts serving as {@code options} say: resources, a scenario played in time, and fault
   * rules (docs/test-control-plane.md) deterministic from a seed.
   */
  public static ControlPlane start(Options options) {
    return new ControlPlane(
        Answers.unwrap(Native.startControlPlane(options.json.toString())).getAsLong());
  }

  /** How to start a {@link ControlPlane}: each setter returns the options, for chaining. */
  public static final class Options {
    private final JsonObject json = new JsonObject();

    /** {@code {"resources": [Any, ...]}}, canonical JSON of a DiscoveryResponse. */
    public Options resources(String resources) {
      json.addProperty("resources", resources);
      return this;
    }

    /** A file or a directory of resource files (.json, .yaml, .pb). */
    public Options resourcesPath(String path) {
      json.addProperty("resources_path", path);
      return this;
    }

    /** FileDescriptorSet files for resources in canonical JSON. */
    public Options descriptors(String... descriptors) {
      json.add("descriptors", Answers.GSON.toJsonTree(descriptors));
      return this;
    }

    /** Fault rules, one per line ({@code drop type=cds nth=1}, {@code close after=3}). */
    public Options faults(String faults) {
      json.addProperty("faults", faults);
      return this;
    }

    /** Where the faults' random draws start: the same seed, the same faults. */
    public Options seed(long seed) {
      json.addProperty("seed", seed);
      return this;
    }

    /** A scenario whose server lines are played in time from the start. */
    public Options scenario(String scenario) {
      json.addProperty("scenario", scenario);
      return this;
    }
  }

  private synchronized com.google.gson.JsonElement call(String method, JsonObject args) {
    if (handle == 0) {
      throw new XdsSansioException("usage", 0, "the control plane is closed");
    }
    return Answers.unwrap(Native.controlPlaneCall(handle, method, args.toString()));
  }

  private static JsonObject args(String... pairs) {
    JsonObject args = new JsonObject();
    for (int i = 0; i + 1 < pairs.length; i += 2) {
      args.addProperty(pairs[i], pairs[i + 1]);
    }
    return args;
  }

  /** The port it listens on. */
  public int port() {
    return port;
  }

  /** {@code 127.0.0.1:PORT}, for a bootstrap's server_uri. */
  public String address() {
    return "127.0.0.1:" + port;
  }

  /** Adds or replaces an encoded resource (named as its body says). */
  public void set(String typeUrl, byte[] body) {
    call("set", args("type_url", typeUrl, "body", Base64.getEncoder().encodeToString(body)));
  }

  /** Removes a resource. */
  public void remove(String typeUrl, String name) {
    call("remove", args("type_url", typeUrl, "name", name));
  }

  /** Serves exactly {@code {"resources": [Any, ...]}} from now on. */
  public void replace(String resources) {
    call("replace", args("resources", resources));
  }

  /** Ends every open stream (clients reconnect and resume). */
  public void endStreams() {
    call("end_streams", new JsonObject());
  }

  /** The recording so far (JSON lines, the record format). */
  public String records() {
    return call("records", new JsonObject()).getAsString();
  }

  /** The checker's findings so far: of {@code side}, or of both sides when null. */
  public List<Finding> findings(String side) {
    JsonObject args = side == null ? new JsonObject() : args("side", side);
    return Arrays.asList(Answers.GSON.fromJson(call("findings", args), Finding[].class));
  }

  /** The checker's findings so far, both sides. */
  public List<Finding> findings() {
    return findings(null);
  }

  /** Stops serving; reads work until {@link #close}. */
  public void stop() {
    call("stop", new JsonObject());
  }

  /** Stops serving and frees the control plane. */
  @Override
  public synchronized void close() {
    if (handle != 0) {
      Native.controlPlaneFree(handle);
      handle = 0;
    }
  }
}
