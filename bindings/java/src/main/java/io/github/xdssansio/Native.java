package io.github.xdssansio;

import java.nio.file.Path;

/**
 * The JNI library (bindings/java/native): the bindings' JSON API. Every method answers
 * {@code {"ok": ...}} or {@code {"error": ...}}; handles are freed once by their
 * {@code *Free} method. Loaded from the directory of the system property
 * {@code xds.sansio.libdir}, else from {@code java.library.path}.
 */
final class Native {
  static {
    String dir = System.getProperty("xds.sansio.libdir");
    if (dir != null && !dir.isEmpty()) {
      System.load(Path.of(dir, System.mapLibraryName("xds_sansio_jni")).toAbsolutePath().toString());
    } else {
      System.loadLibrary("xds_sansio_jni");
    }
  }

  private Native() {}

  static native String check(String records, String options);

  static native String replay(String scenario, String name);

  static native String startControlPlane(String options);

  static native String controlPlaneCall(long plane, String method, String args);

  static native void controlPlaneFree(long plane);

  static native String newStepper(String options);

  static native String stepperCall(long stepper, String method, String args);

  static native void stepperFree(long stepper);
}
