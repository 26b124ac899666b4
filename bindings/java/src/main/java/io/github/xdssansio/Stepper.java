package io.github.xdssansio;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;

/**
 * The model's client ({@code role "client"}: feed it responses) or server ({@code role
 * "server"}: feed it requests) on a virtual clock; every input returns the {@link Step}
 * that followed. Thread-safe; close it to free it.
 */
public final class Stepper implements AutoCloseable {
  /** A message the model sends: encoded, and as text. */
  public record Message(byte[] bytes, String text) {}

  /** An event of the model: its name (Upserted, Acked, ...) and all of it. */
  public record Event(String kind, String detail) {}

  /** What the model sent and its events after one input. */
  public record Step(List<Message> messages, List<Event> events) {
    /** Whether an event of this kind happened. */
    public boolean has(String kind) {
      return events.stream().anyMatch(e -> e.kind().equals(kind));
    }
  }

  private long handle;

  /**
   * A model {@code role} ("client" or "server") speaking {@code variant} ("sotw" or
   * "delta"); {@code nodeId} may be null.
   */
  public Stepper(String role, String variant, String nodeId) {
    JsonObject options = new JsonObject();
    options.addProperty("role", role);
    options.addProperty("variant", variant);
    if (nodeId != null) {
      options.addProperty("node_id", nodeId);
    }
    this.handle = Answers.unwrap(Native.newStepper(options.toString())).getAsLong();
  }

  private synchronized Step call(String method, JsonObject args) {
    if (handle == 0) {
      throw new XdsSansioException("usage", 0, "the stepper is closed");
    }
    JsonObject value = Answers.unwrap(Native.stepperCall(handle, method, args.toString())).getAsJsonObject();
    List<Message> messages = new ArrayList<>();
    for (JsonElement m : value.getAsJsonArray("messages")) {
      JsonObject o = m.getAsJsonObject();
      messages.add(new Message(Base64.getDecoder().decode(o.get("bytes").getAsString()), o.get("text").getAsString()));
    }
    List<Event> events = new ArrayList<>();
    for (JsonElement e : value.getAsJsonArray("events")) {
      JsonObject o = e.getAsJsonObject();
      events.add(new Event(o.get("kind").getAsString(), o.get("detail").getAsString()));
    }
    return new Step(messages, events);
  }

  private static String b64(byte[] bytes) {
    return Base64.getEncoder().encodeToString(bytes);
  }

  /** Client: the stream is up. */
  public Step connected() {
    return call("connected", new JsonObject());
  }

  /** Client: the stream broke. */
  public Step disconnected() {
    return call("disconnected", new JsonObject());
  }

  /** Client: subscribe to names of a type (none: the wildcard). */
  public Step subscribe(String typeUrl, String... names) {
    JsonObject args = new JsonObject();
    args.addProperty("type_url", typeUrl);
    JsonArray list = new JsonArray();
    for (String name : names) {
      list.add(name);
    }
    args.add("names", list);
    return call("subscribe", args);
  }

  /** Server: add or replace an encoded resource in the store. */
  public Step set(String typeUrl, byte[] body) {
    JsonObject args = new JsonObject();
    args.addProperty("type_url", typeUrl);
    args.addProperty("body", b64(body));
    return call("set", args);
  }

  /** Server: remove a resource from the store. */
  public Step remove(String typeUrl, String name) {
    JsonObject args = new JsonObject();
    args.addProperty("type_url", typeUrl);
    args.addProperty("name", name);
    return call("remove", args);
  }

  /** The peer's encoded message: a response to a client, a request to a server. */
  public Step handle(byte[] message) {
    JsonObject args = new JsonObject();
    args.addProperty("bytes", b64(message));
    return call("handle", args);
  }

  /**
   * The peer's message as a generated protobuf message (grpc-java's own envoy types, or
   * any other {@code MessageLite}): handled as its encoding by {@link #handle(byte[])}.
   * protobuf-java is only needed on the class path by callers of this method.
   */
  public Step handle(com.google.protobuf.MessageLite message) {
    return handle(message.toByteArray());
  }

  /** Moves the virtual clock forward and fires what is due. */
  public Step advance(long millis) {
    JsonObject args = new JsonObject();
    args.addProperty("millis", millis);
    return call("advance", args);
  }

  /** Frees the stepper. */
  @Override
  public synchronized void close() {
    if (handle != 0) {
      Native.stepperFree(handle);
      handle = 0;
    }
  }
}
