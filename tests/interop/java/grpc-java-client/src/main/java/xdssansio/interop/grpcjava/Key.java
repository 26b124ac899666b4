package xdssansio.interop.grpcjava;

/** A resource of the store or of the client's CSDS view: its type URL and name. */
record Key(String typeUrl, String name) {
  @Override
  public String toString() {
    return Resources.shortType(typeUrl) + "/" + name;
  }
}
