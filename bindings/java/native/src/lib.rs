#![warn(missing_docs)]
//! The JNI library of the Java package: the bindings' JSON API
//! (`xds_sansio_bindings::wire`) for `io.github.xdssansio.Native`. Every entry point
//! answers JSON text (`{"ok": ...}` or `{"error": ...}`) and catches panics, so nothing
//! crosses into the JVM but a string; objects travel as `long` handles, freed once by
//! their `*Free` method. The typed API and its exceptions are in the Java classes.

use std::panic::{catch_unwind, AssertUnwindSafe};

use jni::objects::{JClass, JString};
use jni::sys::{jlong, jstring};
use jni::JNIEnv;
use xds_sansio_bindings::{wire, ControlPlane, ErrorKind, Stepper};

/// A Java string as Rust text, or an error answer.
fn text(env: &mut JNIEnv<'_>, value: &JString<'_>) -> Result<String, String> {
    if value.is_null() {
        return Err(wire::failure(ErrorKind::Usage, "a null string"));
    }
    env.get_string(value)
        .map(Into::into)
        .map_err(|e| wire::failure(ErrorKind::Usage, &format!("a string: {e}")))
}

/// Runs `body` (panics caught) and hands its answer to Java.
fn answer(
    env: &mut JNIEnv<'_>,
    body: impl FnOnce(&mut JNIEnv<'_>) -> Result<String, String>,
) -> jstring {
    let text = match catch_unwind(AssertUnwindSafe(|| body(env))) {
        Ok(Ok(text)) | Ok(Err(text)) => text,
        Err(_) => wire::failure(ErrorKind::Internal, "the native library panicked"),
    };
    env.new_string(text)
        .map(|s| s.into_raw())
        .unwrap_or(std::ptr::null_mut())
}

/// `{"ok": handle}` for a new object.
fn handle<T>(object: T) -> String {
    let raw = Box::into_raw(Box::new(object)) as usize as u64;
    format!("{{\"ok\":{raw}}}")
}

/// The object behind a handle, or an error answer for 0.
///
/// # Safety
/// `handle` is 0 or from [`handle`] of a `T`, not freed, used by one thread at a time.
unsafe fn object<'a, T>(handle: jlong) -> Result<&'a mut T, String> {
    // SAFETY: the caller's contract.
    unsafe { (handle as usize as *mut T).as_mut() }
        .ok_or_else(|| wire::failure(ErrorKind::Usage, "a closed object"))
}

/// Frees the object behind a handle (0 is ignored).
///
/// # Safety
/// `handle` is 0 or from [`handle`] of a `T`, freed once.
unsafe fn free<T>(handle: jlong) {
    if handle != 0 {
        // SAFETY: from `Box::into_raw` in `handle`, freed once.
        let object = unsafe { Box::from_raw(handle as usize as *mut T) };
        let _ = catch_unwind(AssertUnwindSafe(move || drop(object)));
    }
}

/// A new object from its JSON options: `{"ok": handle}` or an error answer.
fn create<T>(
    env: &mut JNIEnv<'_>,
    options: &JString<'_>,
    make: fn(&str) -> Result<T, xds_sansio_bindings::Error>,
) -> jstring {
    answer(env, |env| {
        let options = text(env, options)?;
        Ok(match make(&options) {
            Ok(object) => handle(object),
            Err(e) => wire::answer::<()>(Err(e)),
        })
    })
}

/// A method call on the object behind `handle`.
///
/// # Safety
/// As [`object`]: `handle` is 0 or a live handle of a `T`; the Java class serializes calls.
unsafe fn call<T>(
    env: &mut JNIEnv<'_>,
    handle: jlong,
    method: &JString<'_>,
    args: &JString<'_>,
    run: fn(&mut T, &str, &str) -> String,
) -> jstring {
    answer(env, |env| {
        let (method, args) = (text(env, method)?, text(env, args)?);
        // SAFETY: the caller's contract.
        let object = unsafe { object::<T>(handle)? };
        Ok(run(object, &method, &args))
    })
}

/// `Native.check(records, options)`.
#[no_mangle]
pub extern "system" fn Java_io_github_xdssansio_Native_check<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    records: JString<'l>,
    options: JString<'l>,
) -> jstring {
    answer(&mut env, |env| {
        Ok(wire::check(&text(env, &records)?, &text(env, &options)?))
    })
}

/// `Native.replay(scenario, name)`.
#[no_mangle]
pub extern "system" fn Java_io_github_xdssansio_Native_replay<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    scenario: JString<'l>,
    name: JString<'l>,
) -> jstring {
    answer(&mut env, |env| {
        Ok(wire::replay(&text(env, &scenario)?, &text(env, &name)?))
    })
}

/// `Native.startControlPlane(options)`: `{"ok": handle}` or an error answer.
#[no_mangle]
pub extern "system" fn Java_io_github_xdssansio_Native_startControlPlane<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    options: JString<'l>,
) -> jstring {
    create(&mut env, &options, wire::control_plane)
}

/// `Native.controlPlaneCall(handle, method, args)`.
#[no_mangle]
pub extern "system" fn Java_io_github_xdssansio_Native_controlPlaneCall<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    plane: jlong,
    method: JString<'l>,
    args: JString<'l>,
) -> jstring {
    // SAFETY: a live handle from `startControlPlane`; the Java class serializes calls.
    unsafe { call::<ControlPlane>(&mut env, plane, &method, &args, wire::control_plane_call) }
}

/// `Native.controlPlaneFree(handle)`.
#[no_mangle]
pub extern "system" fn Java_io_github_xdssansio_Native_controlPlaneFree<'l>(
    _env: JNIEnv<'l>,
    _class: JClass<'l>,
    plane: jlong,
) {
    // SAFETY: the Java class frees each handle once.
    unsafe { free::<ControlPlane>(plane) }
}

/// `Native.newStepper(options)`: `{"ok": handle}` or an error answer.
#[no_mangle]
pub extern "system" fn Java_io_github_xdssansio_Native_newStepper<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    options: JString<'l>,
) -> jstring {
    create(&mut env, &options, wire::stepper)
}

/// `Native.stepperCall(handle, method, args)`.
#[no_mangle]
pub extern "system" fn Java_io_github_xdssansio_Native_stepperCall<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    stepper: jlong,
    method: JString<'l>,
    args: JString<'l>,
) -> jstring {
    // SAFETY: a live handle from `newStepper`; the Java class serializes calls.
    unsafe { call::<Stepper>(&mut env, stepper, &method, &args, wire::stepper_call) }
}

/// `Native.stepperFree(handle)`.
#[no_mangle]
pub extern "system" fn Java_io_github_xdssansio_Native_stepperFree<'l>(
    _env: JNIEnv<'l>,
    _class: JClass<'l>,
    stepper: jlong,
) {
    // SAFETY: the Java class frees each handle once.
    unsafe { free::<Stepper>(stepper) }
}
