//! The C ABI's rules at the boundary: null pointers, bad UTF-8 and bad input are error
//! answers, never a crash; objects live from their constructor to their `_free`.

use std::ffi::{c_char, CStr, CString};
use std::ptr::{null, null_mut};

use xds_sansio_ffi::*;

/// Reads and frees an answer.
fn take(answer: *mut c_char) -> serde_json::Value {
    assert!(!answer.is_null());
    let text = unsafe { CStr::from_ptr(answer) }
        .to_str()
        .unwrap()
        .to_owned();
    unsafe { xds_string_free(answer) };
    serde_json::from_str(&text).unwrap()
}

fn c(text: &str) -> CString {
    CString::new(text).unwrap()
}

#[test]
fn null_and_bad_text_are_error_answers() {
    let answer = take(unsafe { xds_check(null(), null()) });
    assert_eq!(answer["error"]["kind"], "usage");
    let bad = [0xffu8, 0xfe, 0];
    let answer = take(unsafe { xds_replay(bad.as_ptr().cast(), c("x").as_ptr()) });
    assert_eq!(answer["error"]["kind"], "usage");
    let answer =
        take(unsafe { xds_control_plane_call(null_mut(), c("port").as_ptr(), c("").as_ptr()) });
    assert_eq!(answer["error"]["kind"], "usage");
    let answer =
        take(unsafe { xds_stepper_call(null_mut(), c("connected").as_ptr(), c("").as_ptr()) });
    assert_eq!(answer["error"]["kind"], "usage");
    unsafe {
        xds_control_plane_free(null_mut());
        xds_stepper_free(null_mut());
        xds_string_free(null_mut());
    }
}

#[test]
fn a_failed_constructor_returns_null_and_says_why() {
    let mut error: *mut c_char = null_mut();
    let plane =
        unsafe { xds_control_plane_start(c("{\"listen\": \"nowhere\"}").as_ptr(), &mut error) };
    assert!(plane.is_null());
    assert_eq!(take(error)["error"]["kind"], "io");
    let stepper = unsafe { xds_stepper_new(c("{\"role\": \"nobody\"}").as_ptr(), null_mut()) };
    assert!(stepper.is_null());
}

#[test]
fn objects_answer_until_freed() {
    let plane = unsafe { xds_control_plane_start(c("").as_ptr(), null_mut()) };
    assert!(!plane.is_null());
    let port = take(unsafe { xds_control_plane_call(plane, c("port").as_ptr(), c("").as_ptr()) });
    assert!(port["ok"].as_u64().unwrap() > 0);
    let answer =
        take(unsafe { xds_control_plane_call(plane, c("frobnicate").as_ptr(), c("").as_ptr()) });
    assert_eq!(answer["error"]["kind"], "usage");
    let answer = take(unsafe {
        xds_control_plane_call(plane, c("set").as_ptr(), c("{\"type_url\": 1}").as_ptr())
    });
    assert_eq!(answer["error"]["kind"], "usage");
    unsafe { xds_control_plane_free(plane) };

    let stepper = unsafe { xds_stepper_new(c("{\"role\": \"server\"}").as_ptr(), null_mut()) };
    let answer = take(unsafe {
        xds_stepper_call(
            stepper,
            c("handle").as_ptr(),
            c("{\"bytes\": \"//8=\"}").as_ptr(),
        )
    });
    assert_eq!(answer["error"]["kind"], "message");
    let answer = take(unsafe {
        xds_stepper_call(
            stepper,
            c("advance").as_ptr(),
            c("{\"millis\": 1000}").as_ptr(),
        )
    });
    assert!(answer["ok"]["messages"].as_array().unwrap().is_empty());
    unsafe { xds_stepper_free(stepper) };
}
