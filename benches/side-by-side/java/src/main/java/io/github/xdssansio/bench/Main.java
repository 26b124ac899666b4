package io.github.xdssansio.bench;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * The java-control-plane side of benches/side-by-side/go.sh: io.envoyproxy.controlplane
 * 1.0.49 driven in process on the same Envoy Cluster bytes as the Rust and Go sides,
 * printing the Go side's RESULT lines: "java" rows with the server's default
 * DefaultProtoResourcesSerializer, "java-cached" rows with its opt-in
 * CachedProtoResourcesSerializer.
 *
 * <p>-iterations: server and fan-out by name; -fanout-iterations: fan-out SotW wildcard
 * (~10 s a round here); -warmup-seconds: the untimed JIT warm-up of the cheap workloads.
 *
 * <pre>Main -bodies FILE [-iterations N] [-fanout-iterations N] [-warmup-seconds S]
 *      server|fanout ...</pre>
 */
public final class Main {
  private static final int CLUSTERS = 10_000;

  private Main() {}

  public static void main(String[] args) throws Exception {
    String bodiesPath = null;
    int iterations = 21;
    int fanoutIterations = 3;
    double warmupSeconds = 10;
    List<String> sections = new ArrayList<>();
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "-bodies" -> bodiesPath = args[++i];
        case "-iterations" -> iterations = Integer.parseInt(args[++i]);
        case "-fanout-iterations" -> fanoutIterations = Integer.parseInt(args[++i]);
        case "-warmup-seconds" -> warmupSeconds = Double.parseDouble(args[++i]);
        default -> sections.add(args[i]);
      }
    }
    if (bodiesPath == null) {
      System.err.println("-bodies FILE is required");
      System.exit(2);
    }
    Bodies b = Bodies.read(Path.of(bodiesPath), CLUSTERS);
    for (String section : sections) {
      switch (section) {
        case "server" -> {
          ServerBench.run(b, "java", SotwStream.DEFAULT, iterations, warmupSeconds);
          ServerBench.run(b, "java-cached", SotwStream.CACHED, iterations, warmupSeconds);
        }
        case "fanout" -> {
          FanoutBench.run(b, "java", SotwStream.DEFAULT, fanoutIterations, iterations,
              warmupSeconds);
          FanoutBench.run(b, "java-cached", SotwStream.CACHED, fanoutIterations, iterations,
              warmupSeconds);
        }
        default -> {
          System.err.println("unknown section " + section);
          System.exit(2);
        }
      }
    }
  }
}
