package io.github.xdssansio.bench;

import com.google.protobuf.ByteString;
import io.envoyproxy.envoy.config.cluster.v3.Cluster;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * The Envoy Clusters the Rust harness wrote ({@code vs_go bodies FILE}): the 10 000 clusters
 * at generation 1, then cluster 0 at generations 2 and 3 (the changes), each a u32
 * little-endian length and the bytes.
 */
final class Bodies {
  /** The bodies as Java's protobuf encodes them (field-number order, as Go's). */
  final List<ByteString> javaRaw;
  /** The bodies as written, parsed again on every {@link #fresh()} call. */
  private final List<byte[]> raw;
  final List<Cluster> typed;
  final Cluster[] changed;

  private Bodies(List<byte[]> raw, List<ByteString> javaRaw, List<Cluster> typed,
      Cluster[] changed) {
    this.raw = raw;
    this.javaRaw = javaRaw;
    this.typed = typed;
    this.changed = changed;
  }

  /**
   * Reads the file and decodes every body into a typed Cluster, checked to encode back to the
   * same message of the same length (prost writes alt_stat_name, field 28, second; Java
   * writes fields in number order, so the bytes differ, not the message).
   */
  static Bodies read(Path path, int n) throws IOException {
    ByteBuffer in = ByteBuffer.wrap(Files.readAllBytes(path)).order(ByteOrder.LITTLE_ENDIAN);
    List<byte[]> raw = new ArrayList<>();
    while (in.hasRemaining()) {
      byte[] body = new byte[in.getInt()];
      in.get(body);
      raw.add(body);
    }
    if (raw.size() != n + 2) {
      throw new IOException(path + ": " + raw.size() + " bodies, want " + (n + 2));
    }
    List<Cluster> typed = new ArrayList<>(raw.size());
    List<ByteString> javaRaw = new ArrayList<>(raw.size());
    for (int i = 0; i < raw.size(); i++) {
      Cluster c = Cluster.parseFrom(raw.get(i));
      ByteString again = c.toByteString();
      if (again.size() != raw.get(i).length || !Cluster.parseFrom(again).equals(c)) {
        throw new IOException("body " + i + " does not encode back to the same message");
      }
      typed.add(c);
      javaRaw.add(again);
    }
    return new Bodies(raw.subList(0, n), javaRaw.subList(0, n), typed.subList(0, n),
        new Cluster[] {typed.get(n), typed.get(n + 1)});
  }

  /**
   * Fresh typed clusters, parsed from the bytes: Java messages memoize their encoded size,
   * so a "fresh" cache must not be handed messages an earlier response already sized.
   */
  List<Cluster> fresh() {
    List<Cluster> out = new ArrayList<>(raw.size());
    for (byte[] body : raw) {
      try {
        out.add(Cluster.parseFrom(body));
      } catch (IOException e) {
        throw new IllegalStateException(e);
      }
    }
    return out;
  }
}
