//! napi-rs's link set-up for a node addon.
fn main() {
    napi_build::setup();
}
