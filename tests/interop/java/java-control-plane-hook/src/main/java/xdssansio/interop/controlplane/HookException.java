package xdssansio.interop.controlplane;

/** An event the hook cannot do: the reason is its answer on the control socket. */
final class HookException extends Exception {
  HookException(String reason) {
    super(reason);
  }
}
