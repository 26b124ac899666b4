package io.github.xdssansio;

/**
 * A failure on the native side: {@link #kind()} says what failed (record, scenario,
 * resources, message, usage, io, internal), {@link #line()} the 1-based line of the input
 * when it has lines (0 otherwise).
 */
public final class XdsSansioException extends RuntimeException {
  private static final long serialVersionUID = 1L;
  private final String kind;
  private final int line;

  XdsSansioException(String kind, int line, String message) {
    super(line > 0 ? "line " + line + ": " + message : message);
    this.kind = kind;
    this.line = line;
  }

  /** What failed. */
  public String kind() {
    return kind;
  }

  /** The input's line, or 0. */
  public int line() {
    return line;
  }
}
