package xdssansio.interop.grpcjava;

import java.io.IOException;
import java.util.concurrent.TimeUnit;

/** Unix signals to a child process (Java has no API for them): `kill -SIG PID`. */
final class Signals {
  private Signals() {}

  static void send(Process process, String signal) throws IOException, InterruptedException {
    Process kill =
        new ProcessBuilder("kill", "-" + signal, Long.toString(process.pid()))
            .inheritIO()
            .start();
    if (!kill.waitFor(5, TimeUnit.SECONDS) || kill.exitValue() != 0) {
      throw new IOException("kill -" + signal + " " + process.pid() + " failed");
    }
  }
}
