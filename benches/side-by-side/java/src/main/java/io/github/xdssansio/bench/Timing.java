package io.github.xdssansio.bench;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.function.LongSupplier;

/** Interleaved timing, printed as the Go side's RESULT lines (go.sh reads both). */
final class Timing {
  private Timing() {}

  /** One side of a comparison: its setup untimed, it returns the span it measures in ns. */
  record Contender(String label, LongSupplier run) {}

  /**
   * Runs every contender once per iteration, the order rotated each iteration, and prints
   * one RESULT line per contender: figure, label, median, first and third quartiles, in
   * seconds (the Go side's format).
   */
  static void rotate(String figure, int iterations, List<Contender> contenders) {
    int n = contenders.size();
    List<List<Double>> samples = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      samples.add(new ArrayList<>());
    }
    for (int it = 0; it < iterations; it++) {
      for (int k = 0; k < n; k++) {
        int idx = (it + k) % n;
        samples.get(idx).add(contenders.get(idx).run().getAsLong() / 1e9);
      }
    }
    for (int i = 0; i < n; i++) {
      List<Double> v = samples.get(i);
      Collections.sort(v);
      int m = v.size();
      System.out.printf(Locale.ROOT, "RESULT\t%s\t%s\t%.9f\t%.9f\t%.9f%n", figure,
          contenders.get(i).label(), v.get(m / 2), v.get(m / 4), v.get(m * 3 / 4));
    }
    System.out.flush();
  }

  /** Runs every contender until seconds have passed (JIT warm-up); returns the rounds run. */
  static int warmUp(double seconds, List<Contender> contenders) {
    long end = System.nanoTime() + (long) (seconds * 1e9);
    int rounds = 0;
    do {
      for (Contender c : contenders) {
        c.run().getAsLong();
      }
      rounds++;
    } while (System.nanoTime() < end);
    return rounds;
  }
}
