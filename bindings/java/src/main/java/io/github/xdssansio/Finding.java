package io.github.xdssansio;

/**
 * One broken rule: its id, the side that broke it, the recording's line, what was wrong,
 * and the protocol passage the rule comes from.
 */
public record Finding(String rule, String side, int line, String detail, String passage) {
  @Override
  public String toString() {
    return side + " line " + line + ": " + rule + ": " + detail + " (" + passage + ")";
  }
}
