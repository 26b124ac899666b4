#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| xds_sansio_conformance::fuzzing::refs(data));
