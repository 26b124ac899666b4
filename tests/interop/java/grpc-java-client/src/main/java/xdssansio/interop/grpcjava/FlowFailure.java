package xdssansio.interop.grpcjava;

/** A failed expectation of the story: reported, and the run exits non-zero. */
final class FlowFailure extends RuntimeException {
  FlowFailure(String message) {
    super(message);
  }
}
