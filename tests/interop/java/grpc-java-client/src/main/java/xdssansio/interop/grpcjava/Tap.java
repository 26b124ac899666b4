package xdssansio.interop.grpcjava;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * With XDS_TAP (the xds-sansio binary), `xds-sansio tap` between the client and the
 * server, as xds_flow.py's start_tap: the client dials the tap instead.
 */
final class Tap {
  private final Process process;
  final String address;

  private Tap(Process process, String address) {
    this.process = process;
    this.address = address;
  }

  /** The tap in front of `upstream`, or null without XDS_TAP. */
  static Tap start(String upstream, Path workdir) throws IOException, InterruptedException {
    String binary = System.getenv("XDS_TAP");
    if (binary == null || binary.isEmpty()) {
      return null;
    }
    Path out = workdir.resolve("tap.txt");
    Process process =
        new ProcessBuilder(
                binary, "tap", "--listen", "127.0.0.1:0", "--upstream", upstream,
                "--record", workdir.resolve("tap.jsonl").toString())
            .redirectErrorStream(true)
            .redirectOutput(out.toFile())
            .start();
    long deadline = System.currentTimeMillis() + 10_000;
    while (System.currentTimeMillis() < deadline) {
      List<String> lines = Files.readAllLines(out, StandardCharsets.UTF_8);
      if (!lines.isEmpty() && lines.get(0).startsWith("tap listening on ")) {
        String address = lines.get(0).split("\\s+")[3];
        return new Tap(process, address.replaceAll(",$", ""));
      }
      Thread.sleep(50);
    }
    process.destroyForcibly();
    throw new FlowFailure("the tap did not start");
  }

  /** Ends the tap (SIGTERM: it prints its closing line). */
  void stop() throws InterruptedException {
    process.destroy();
    if (!process.waitFor(10, TimeUnit.SECONDS)) {
      process.destroyForcibly();
    }
  }
}
