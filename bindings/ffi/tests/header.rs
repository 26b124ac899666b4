//! The committed C header is what cbindgen generates from the crate now.
//! `XDS_SANSIO_REGENERATE=1 cargo test -p xds-sansio-ffi --test header` rewrites it.

use std::path::Path;

#[test]
fn the_header_is_up_to_date() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).unwrap();
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(crate_dir)
        .with_config(config)
        .generate()
        .unwrap()
        .write(&mut generated);
    let generated = String::from_utf8(generated).unwrap();
    let path = crate_dir.join("include/xds_sansio.h");
    if std::env::var_os("XDS_SANSIO_REGENERATE").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "{} is stale: run XDS_SANSIO_REGENERATE=1 cargo test -p xds-sansio-ffi --test header",
        path.display()
    );
}
