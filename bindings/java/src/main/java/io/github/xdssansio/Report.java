package io.github.xdssansio;

import java.util.List;

/** A replayed scenario: its lines, whether all held, and the two-column diagram. */
public record Report(String title, boolean passed, List<Line> lines, String trailing, String diagram) {
  /** One line of the scenario. */
  public record Line(int line, String source, String actual, boolean ok, String error, String note) {}
}
